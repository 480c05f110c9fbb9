"""The fenced code blocks of the README and the docs pages, run as a reader would run them (issues 44 and 46).

The pages are README.md, then every page of mkdocs.yml's nav that is a file under docs/, in nav order (the guides
moved out of the README keep their blocks tested; docs/architecture.md, never run, is left out). Every fenced block
carries a language:

- ```python: run in a subprocess (the venv's interpreter), in a shared working directory;
- ```bash / ```sh / ```shell: each `deviate`, `deviate-replicate` or `python` command (continuation lines joined,
  ``VAR=value`` prefixes kept) run through bash with the venv's ``bin`` first on ``PATH``; other commands (``pip``,
  ``make``) are not run;
- ```console: the lines after ``$ `` are commands, run likewise; the rest is their shown output, and each shown
  line that starts with the command's own name and a colon (``deviate audit: replicas 0, 1 diverge ...``) must be
  among the output's lines, numbers aside;
- ```text: shown output or a synopsis, never run.

An HTML comment on the line before a block changes what is done with it, and always says why:
``<!-- readme-check: skip (needs a Slurm cluster) -->`` (not run), ``<!-- readme-check: given FILE (...) -->``
(a python fragment, run after FILE's code, which defines the names it takes as given) and ``<!-- readme-check:
exit 1 (the replicas diverge) -->`` (the exit status of each command, in order; one number for all; default 0).

The working directory holds what the blocks name: ``tests/`` and ``examples/`` (links to the repository's),
``train.py`` (tests/readme/train.py, a tiny Lightning classifier) and a run store ``runs/`` that already holds
``impl`` replicas of it, so the ``deviate-replicate ... --out runs/ -- python train.py`` block adds the
``algo+impl`` group that ``deviate report``, ``deviate compare`` and the Python blocks read after it. Blocks run
in the pages' order. The opening section may change: nothing here depends on its text or line numbers.
Afterwards every entry the blocks left in the working directory must be one the repository's .gitignore ignores:
run from a clone, the pages leave nothing for ``git status`` to list.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MKDOCS = ROOT / "mkdocs.yml"
NOT_RUN_PAGES = {"architecture.md"}  # the design reference: its blocks are file layouts and schemas
NAV_PAGE = re.compile(r"^\s*-\s.*?(?P<page>[\w/.-]+\.md)\s*$")  # a nav entry: "- Title: page.md"
BIN = Path(sys.executable).parent

RUN_LANGS = {"python", "bash", "sh", "shell", "console"}
LANGS = RUN_LANGS | {"text"}
PROGRAMS = {"deviate", "deviate-replicate", "python", "python3"}
MARKER = re.compile(r"^<!--\s*readme-check:\s*(?P<kind>\w+)\s*(?P<arg>.*?)\s*-->\s*$")
FENCE = re.compile(r"^(?P<fence>```+|~~~+)\s*(?P<info>.*)$")
NUMBER = re.compile(r"[-+]?\d+(?:[.,]\d+)*(?:e[-+]?\d+)?")
BLOCK_TIMEOUT_S = 300
PREPARED = {"tests", "examples", "train.py"}  # what the working directory holds before the blocks run
TRAIN_COMMAND = ["python", "train.py", "--epochs", "10"]  # as the `deviate-replicate ... --out runs/` block


@dataclass(frozen=True)
class Block:
    """One fenced block: the line of its opening fence (1-based), its language, its text and its marker."""

    line: int
    lang: str
    code: str
    kind: str = "run"  # run, skip, given, exit
    arg: str = ""
    marker_problem: str = ""
    page: str = "README.md"


@dataclass(frozen=True)
class Command:
    """A command of a shell or console block: its page line, its text, and the output the page shows."""

    line: int
    text: str
    shown: tuple[str, ...] = ()


def doc_pages() -> list[Path]:
    """README.md, then the nav pages of mkdocs.yml that are files under docs/, in nav order."""
    pages = [README]
    for line in MKDOCS.read_text(encoding="utf-8").split("\n"):
        m = NAV_PAGE.match(line)
        if m and m.group("page") not in NOT_RUN_PAGES and (ROOT / "docs" / m.group("page")).is_file():
            pages.append(ROOT / "docs" / m.group("page"))
    return pages


def page_blocks() -> list[Block]:
    """The fenced blocks of every page of :func:`doc_pages`, in order."""
    return [
        b for page in doc_pages() for b in readme_blocks(page.read_text("utf-8"), page.relative_to(ROOT).as_posix())
    ]


def readme_blocks(text: str, page: str = "README.md") -> list[Block]:
    """The fenced blocks of a Markdown text, with the marker on the line before each."""
    lines = text.split("\n")
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group("fence"), m.group("info").strip()
        end = i + 1
        close = re.compile(rf"^{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        while end < len(lines) and not close.match(lines[end]):
            end += 1
        kind, arg, problem = "run", "", ""
        prev = lines[i - 1].strip() if i else ""
        if "readme-check" in prev:
            mm = MARKER.match(prev)
            if mm is None:
                problem = f"unreadable marker {prev!r}"
            else:
                kind, arg = mm.group("kind"), mm.group("arg")
        lang = info.split()[0] if info else ""
        blocks.append(Block(i + 1, lang, "\n".join(lines[i + 1 : end]), kind, arg, problem, page))
        i = end + 1
    return blocks


def _reason(arg: str) -> str:
    m = re.search(r"\((.+)\)\s*$", arg)
    return m.group(1).strip() if m else ""


def block_problems(block: Block) -> list[str]:
    """What is wrong with a block's language or marker, before anything runs."""
    where = f"{block.page}:{block.line}"
    out = []
    if block.lang not in LANGS:
        out.append(
            f"{where}: a fenced block without a known language ({block.lang or 'none'}): tag it ```python, "
            "```bash, ```console (commands after `$ `) or ```text (shown output, synopses)"
        )
    if block.marker_problem:
        out.append(f"{where}: {block.marker_problem}: expected <!-- readme-check: skip|given|exit ... (reason) -->")
    if block.kind not in {"run", "skip", "given", "exit"}:
        out.append(f"{where}: unknown readme-check kind {block.kind!r} (skip, given or exit)")
    if block.kind in {"skip", "given", "exit"} and not _reason(block.arg):
        out.append(f"{where}: the readme-check {block.kind} marker gives no reason in parentheses")
    if block.kind != "run" and block.lang == "text":
        out.append(f"{where}: a readme-check marker on a ```text block, which is never run")
    if block.kind == "given":
        given = block.arg.split("(")[0].strip()
        if block.lang != "python":
            out.append(f"{where}: `given` is for ```python blocks")
        elif not (ROOT / given).is_file():
            out.append(f"{where}: the given file {given!r} does not exist")
    if block.kind == "exit":
        statuses = block.arg.split("(")[0].replace(",", " ").split()
        if not statuses or not all(s.isdigit() for s in statuses):
            out.append(f"{where}: `exit` takes exit statuses, e.g. `exit 1 (why)` or `exit 0, 1 (why)`")
        elif len(statuses) > 1 and len(statuses) != len(block_commands(block)):
            out.append(f"{where}: {len(statuses)} exit statuses for {len(block_commands(block))} commands")
    return out


def _program(command: str) -> str:
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return ""
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]
    return words[0] if words else ""


def block_commands(block: Block) -> list[Command]:
    """The commands a shell or console block runs (those of PROGRAMS), with the output a console block shows."""
    lines = block.code.split("\n")
    commands: list[Command] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if block.lang == "console":
            if not line.startswith("$ "):
                i += 1
                continue
            line = line[2:]
        start = i
        while line.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line.rstrip()[:-1].rstrip() + " " + lines[i].strip()
        i += 1
        shown: list[str] = []
        if block.lang == "console":
            while i < len(lines) and not lines[i].startswith("$ "):
                shown.append(lines[i])
                i += 1
        if _program(line) in PROGRAMS:
            commands.append(Command(block.line + 1 + start, line.strip(), tuple(shown)))
    return commands


def _masked(line: str) -> str:
    return " ".join(NUMBER.sub("#", line).split())


def shown_verdicts(command: Command) -> list[str]:
    """The shown lines that start with the command's own name and a colon (``deviate audit: ...``)."""
    words = shlex.split(command.text, comments=True)
    while words and "=" in words[0] and not words[0].startswith("-"):
        words = words[1:]
    name = " ".join(words[:2]) if words[:1] == ["deviate"] and len(words) > 1 else words[0]
    return [line for line in command.shown if line.startswith(f"{name}:")]


def test_parser_reads_blocks_markers_and_commands() -> None:
    text = "\n".join(
        [
            "# t",
            "<!-- readme-check: exit 1, 0 (the first diverges) -->",
            "```console",
            "$ OMP_NUM_THREADS=1 deviate audit --trainer a.py:f \\",
            "      --steps 4",
            "deviate audit: replicas 0, 1 diverge at training step 3 (0-based)",
            "...",
            "$ pip install x",
            "$ deviate report runs/",
            "```",
            "<!-- readme-check: skip -->",
            "```bash",
            "make demo  # no",
            "```",
            "```",
            "x",
            "```",
        ]
    )
    blocks = readme_blocks(text)
    assert [(b.line, b.lang, b.kind) for b in blocks] == [(3, "console", "exit"), (12, "bash", "skip"), (15, "", "run")]
    commands = block_commands(blocks[0])
    assert [c.text for c in commands] == [
        "OMP_NUM_THREADS=1 deviate audit --trainer a.py:f --steps 4",
        "deviate report runs/",
    ]
    assert commands[0].line == 4
    assert shown_verdicts(commands[0]) == ["deviate audit: replicas 0, 1 diverge at training step 3 (0-based)"]
    assert block_problems(blocks[0]) == []
    assert "gives no reason" in block_problems(blocks[1])[0]
    assert "without a known language" in block_problems(blocks[2])[0]
    assert block_commands(blocks[1]) == []


def test_the_pages_are_the_readme_and_the_nav_in_order() -> None:
    pages = [p.relative_to(ROOT).as_posix() for p in doc_pages()]
    assert pages[0] == "README.md" and "docs/commands.md" in pages and "docs/architecture.md" not in pages
    assert pages.index("docs/your-project.md") < pages.index("docs/audit.md") < pages.index("docs/statistics.md")


def test_every_readme_block_is_tagged_and_every_marker_says_why() -> None:
    blocks = page_blocks()
    assert any(b.page == "README.md" for b in blocks), "README.md has no fenced blocks"
    problems = [p for b in blocks for p in block_problems(b)]
    assert not problems, "\n".join(problems)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEVIATE_", "HYDRA_"))}
    for name in ("CUDA_VISIBLE_DEVICES", "KERAS_BACKEND", "PL_GLOBAL_SEED", "PYTHONPATH", "OMP_NUM_THREADS"):
        env.pop(name, None)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["MPLBACKEND"] = "Agg"
    env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            args, cwd=cwd, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return subprocess.CompletedProcess(args, 124, out, f"timed out after {BLOCK_TIMEOUT_S} s")


def _tail(proc: subprocess.CompletedProcess[str], n: int = 40) -> str:
    lines = (proc.stdout + proc.stderr).strip().split("\n")
    return "\n    ".join(lines[-n:])


def _workdir(root: Path, env: dict[str, str]) -> Path:
    work = root / "project"
    work.mkdir()
    for name in ("tests", "examples"):
        (work / name).symlink_to(ROOT / name, target_is_directory=True)
    (work / "train.py").write_text((ROOT / "tests" / "readme" / "train.py").read_text(encoding="utf-8"))
    seeded = _run(
        [str(BIN / "deviate-replicate"), "-n", "3", "--variant", "impl", "--out", "runs/", "--", *TRAIN_COMMAND],
        work,
        env,
    )
    assert seeded.returncode == 0, f"preparing runs/ failed:\n    {_tail(seeded)}"
    return work


def _run_python(block: Block, work: Path, env: dict[str, str], root: Path) -> list[str]:
    code = block.code
    prefix = 0
    if block.kind == "given":
        given = (ROOT / block.arg.split("(")[0].strip()).read_text(encoding="utf-8")
        prefix = given.count("\n") + 1
        code = given + "\n" + code
    script = root / f"block_{Path(block.page).stem}_line{block.line}.py"
    script.write_text(code + "\n", encoding="utf-8")
    proc = _run([sys.executable, str(script)], work, env)
    if proc.returncode == 0:
        return []
    note = f" (its first {prefix} lines are {block.arg.split('(')[0].strip()})" if prefix else ""
    return [f"{block.page}:{block.line}: the python block exited {proc.returncode}{note}:\n    {_tail(proc)}"]


def _run_commands(block: Block, work: Path, env: dict[str, str]) -> list[str]:
    commands = block_commands(block)
    statuses = [int(s) for s in block.arg.split("(")[0].replace(",", " ").split()] if block.kind == "exit" else []
    if len(statuses) <= 1:
        statuses = (statuses or [0]) * len(commands)
    failures = []
    for command, expected in zip(commands, statuses, strict=True):
        proc = _run(["bash", "-c", command.text], work, env)
        if proc.returncode != expected:
            failures.append(
                f"{block.page}:{command.line}: `{command.text}` exited {proc.returncode} (expected {expected}):\n"
                f"    {_tail(proc)}"
            )
            continue
        printed = {_masked(line) for line in (proc.stdout + proc.stderr).split("\n")}
        for shown in shown_verdicts(command):
            if _masked(shown) not in printed:
                failures.append(
                    f"{block.page}:{command.line}: `{command.text}` did not print the line the page shows, "
                    f"numbers aside:\n    shown:   {shown}\n    printed: {_tail(proc, 15)}"
                )
    return failures


@pytest.mark.slow
def test_readme_blocks_run_as_written(tmp_path: Path) -> None:
    blocks = page_blocks()
    problems = [p for b in blocks for p in block_problems(b)]
    assert not problems, "\n".join(problems)
    env = _env()
    work = _workdir(tmp_path, env)
    failures: list[str] = []
    ran = 0
    for block in blocks:
        if block.lang not in RUN_LANGS or block.kind == "skip":
            continue
        started = time.monotonic()
        if block.lang == "python":
            failures += _run_python(block, work, env, tmp_path)
        elif block_commands(block):
            failures += _run_commands(block, work, env)
        else:
            continue
        ran += 1
        print(f"{block.page}:{block.line}: {block.lang} block, {time.monotonic() - started:.1f} s")
    assert ran >= 5, f"only {ran} blocks ran: the extraction lost them"
    assert not failures, "blocks that fail as written:\n" + "\n".join(failures)
    left = sorted(p.name + ("/" if p.is_dir() else "") for p in work.iterdir() if p.name not in PREPARED)
    assert left, "the blocks left nothing in their working directory"
    assert not (unignored := not_ignored(left)), (
        f"run from a clone, the blocks leave {unignored}, which .gitignore does not ignore"
    )


def not_ignored(names: list[str]) -> list[str]:
    """The names, as top-level entries of the repository, that its .gitignore does not ignore."""
    proc = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        cwd=ROOT,
        input="\n".join(names) + "\n",
        capture_output=True,
        text=True,
        check=False,
    )
    ignored = set(proc.stdout.split())
    return [name for name in names if name not in ignored]


def test_gitignore_covers_what_the_readme_and_examples_leave() -> None:
    assert not_ignored(["deviate_runs/", "runs/", "deviate_audit/", "reference/", "lightning_logs/"]) == []
    assert not_ignored(["train.py", "deviate_cb/"]) == ["train.py", "deviate_cb/"]
