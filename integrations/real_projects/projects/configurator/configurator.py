"""Poor man's configurator, as nanoGPT has it (``exec(open('configurator.py').read())`` from train.py).

Every argument is either a config file, executed over train.py's globals:

    python train.py config/tiny.py

or an override of one of train.py's globals, ``key=value`` or ``--key=value``:

    python train.py --out_dir=out-other max_iters=20 learning_rate=1e-2

The value is read with ``ast.literal_eval`` (a number, a bool, a quoted string); what it cannot read is taken as a
string. The word is split on ``=`` as it is: a value holding ``=`` is refused, as nanoGPT refuses it.
"""

import sys
from ast import literal_eval

for arg in sys.argv[1:]:
    if "=" not in arg:
        # assume it's the name of a config file
        assert not arg.startswith("--")
        config_file = arg
        print(f"Overriding config with {config_file}:")
        with open(config_file) as f:
            print(f.read())
        exec(open(config_file).read())  # noqa: SIM115 (as nanoGPT has it)
    else:
        # assume it's a --key=value (or key=value) argument
        key, val = arg.split("=")
        key = key[2:] if key.startswith("--") else key
        if key in globals():
            try:
                # attempt to eval it (e.g. if bool, number, etc.)
                attempt = literal_eval(val)
            except (SyntaxError, ValueError):
                # if that goes wrong, just use the string
                attempt = val
            # ensure the types match ok
            assert type(attempt) is type(globals()[key]), f"{key}: {type(attempt)} is not {type(globals()[key])}"
            # cross fingers
            print(f"Overriding: {key} = {attempt}")
            globals()[key] = attempt
        else:
            raise ValueError(f"Unknown config key: {key}")
