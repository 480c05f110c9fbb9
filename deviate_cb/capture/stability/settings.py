"""What the callbacks' ``predictions=`` and ``weights=`` arguments say: the :class:`Predictions` and
:class:`Weights` settings, checked when they are made.

Example:
    >>> config = parse_predictions(Predictions(groups="sex"), "predictions")
    >>> config.groups_per_batch, config.records_stage("test")
    (True, True)
    >>> config.due(epoch=4), Predictions(data=[[0]], every_n_epochs=5).due(epoch=4)
    (False, True)
    >>> parse_weights(Weights(full=True)).full
    True
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from typing import Any, Literal, Optional, TypeVar, Union

import numpy as np

from deviate_cb.errors import UsageError

__all__ = [
    "Extractor",
    "Predictions",
    "Weights",
    "count_entries",
    "parse_predictions",
    "parse_weights",
]

Stage = Literal["auto", "test", "predict"]
Task = Literal["auto", "classification", "regression"]
Extractor = Union[int, str, Callable[[Any], Any]]
GroupsSpec = Union[Mapping[str, Any], str, Sequence[str], Callable[[Any], Any], np.ndarray]
_STAGES = ("auto", "test", "predict")
_TASKS = ("auto", "classification", "regression")


def _is_extractor(value: object) -> bool:
    return callable(value) or isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


@dataclass(frozen=True)
class Predictions:
    """Record per-sample predictions on an evaluation set (``DeviateCallback(predictions=Predictions(...))``).

    Two sources, usable together:

    - **The user's own evaluation loop** (``data=None``, the default; Lightning only): the outputs that
      ``test_step``/``predict_step`` return during ``trainer.test(...)``/``trainer.predict(...)`` (a tensor of
      logits, probabilities or predicted classes, or a dict holding one under ``output_key``) are recorded,
      with the labels of each batch, as snapshot ``final`` when the stage ends. Nothing runs twice. With
      several dataloaders, the first one's outputs; with several devices, none (use ``data``).
    - **A given evaluation set** (``data=...``): the callback predicts on it itself, at the end of ``fit``
      (snapshot ``final``) and, with ``every_n_epochs=k``, after every k-th epoch (snapshot ``epoch=<e>``,
      ``e`` the 0-based epoch that just ended). Lightning: a ``DataLoader`` (or any iterable of batches);
      the module runs in eval mode under ``torch.inference_mode()`` (its ``predict_step`` if it defines one,
      else ``forward`` on the first element of a tuple batch), and each submodule's train/eval mode is
      restored afterwards. Keras: ``(x, y)`` arrays, ``x`` alone, a ``tf.data.Dataset``, a ``PyDataset`` or
      any iterable of ``(x, y)`` batches, predicted with ``model.predict``/``predict_on_batch``.

    The sample index is the position in the evaluation set, so the data must come in the same order in every
    run (no shuffling), or carry an id (``sample_ids``). A snapshot written again (a resumed run, a second
    ``trainer.test``) replaces the earlier one of the same name.

    Args:
        data: Evaluation set the callback predicts on itself (see above). ``None``: record the outputs of
            ``trainer.test``/``trainer.predict`` (Lightning).
        every_n_epochs: Also take a snapshot after every n-th training epoch (needs ``data``).
        groups: Sub-group labels of each sample (for per-group variance): a mapping name -> array aligned
            with the sample order (``{"sex": sex_array}``), a NumPy array (named ``group``), a batch field
            name or list of names (dict batches, e.g. ``"sex"`` or ``["sex", "age_band"]``), or a function
            ``batch -> array | {name: array}``.
        labels: Where the true label is in a batch: an index (tuple batches), a key (dict batches) or a
            function ``batch -> array``. Default: ``batch[1]`` of a tuple/list batch, else the first of
            ``label``, ``labels``, ``y``, ``target``, ``targets`` in a dict batch, else no labels.
        sample_ids: Where a per-sample id is in a batch (index, key or function), for data that is not in
            a fixed order. Default: the position in the evaluation set.
        output_key: Which output to record when a step returns a dict (a key) or a tuple (an index).
            Default for dicts: the first of ``preds``, ``logits``, ``probs``, ``y_hat``, ``predictions``,
            ``outputs``.
        from_stage: Which of the user's loops to record (Lightning): ``"test"``, ``"predict"``, ``"auto"``
            (both, when ``data`` is ``None``; neither when it is given) or ``None`` (neither). Naming a loop
            together with ``data`` makes that loop's outputs the ``final`` snapshot: ``data`` then serves only
            the ``every_n_epochs`` snapshots (no extra pass at the end of ``fit``).
        task: ``"classification"`` ((n, C) scores or (n,) class ids), ``"regression"`` (values), or
            ``"auto"`` (decided by the store from the outputs' shape and dtype).
        predict_fn: Lightning with ``data``: a function ``(module, batch) -> outputs`` to use instead of
            ``predict_step``/``forward``.

    Example:
        >>> Predictions(every_n_epochs=2)
        Traceback (most recent call last):
        ...
        deviate_cb.errors.UsageError: `every_n_epochs` needs `data`: ... Received: every_n_epochs=2, data=None.
        >>> Predictions(from_stage="val")
        Traceback (most recent call last):
        ...
        deviate_cb.errors.UsageError: `from_stage` must be one of 'auto', ... Received: from_stage='val'.
    """

    data: Any = field(default=None, repr=False)
    every_n_epochs: Optional[int] = None
    groups: Optional[GroupsSpec] = field(default=None, repr=False)
    labels: Optional[Extractor] = None
    sample_ids: Optional[Extractor] = None
    output_key: Union[str, int, None] = None
    from_stage: Optional[Stage] = "auto"
    task: Task = "auto"
    predict_fn: Optional[Callable[[Any, Any], Any]] = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.data, (str, bytes, PathLike)):
            raise UsageError(
                "`data` must be an evaluation set (a DataLoader, arrays or a dataset), not a path. "
                f"Received: data={self.data!r}."
            )
        if isinstance(self.data, Iterator):
            raise UsageError(
                "`data` must be re-iterable (a DataLoader, a dataset, arrays), not a one-shot iterator or "
                f"generator: it is read at every snapshot. Received: data={self.data!r}."
            )
        k = self.every_n_epochs
        if k is not None and (isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1):
            raise UsageError(f"`every_n_epochs` must be a positive integer or None. Received: every_n_epochs={k!r}.")
        if k is not None and self.data is None:
            raise UsageError(
                "`every_n_epochs` needs `data`: the callback predicts on that set after every n-th epoch. "
                f"Received: every_n_epochs={k!r}, data=None."
            )
        for name in ("labels", "sample_ids"):
            value = getattr(self, name)
            if value is not None and not _is_extractor(value):
                raise UsageError(
                    f"`{name}` must be a batch index, a batch key, a function of the batch, or None. "
                    f"Received: {name}={value!r}."
                )
        key = self.output_key
        if key is not None and (isinstance(key, bool) or not isinstance(key, (str, int))):
            raise UsageError(f"`output_key` must be a dict key, a tuple index or None. Received: output_key={key!r}.")
        if self.from_stage not in (*_STAGES, None):
            raise UsageError(
                "`from_stage` must be one of 'auto', 'test', 'predict' or None. "
                f"Received: from_stage={self.from_stage!r}."
            )
        if self.task not in _TASKS:
            raise UsageError(f"`task` must be 'auto', 'classification' or 'regression'. Received: task={self.task!r}.")
        if self.predict_fn is not None and not callable(self.predict_fn):
            raise UsageError(
                f"`predict_fn` must be a function (module, batch) -> outputs. Received: {self.predict_fn!r}."
            )
        _check_groups(self.groups)

    def due(self, epoch: int) -> bool:
        """Whether a snapshot is due after (0-based) ``epoch``: every ``every_n_epochs``-th epoch.

        Example:
            >>> [Predictions(data=[], every_n_epochs=2).due(e) for e in range(4)]
            [False, True, False, True]
        """
        return self.every_n_epochs is not None and (epoch + 1) % self.every_n_epochs == 0

    @property
    def final_from_data(self) -> bool:
        """Whether the ``final`` snapshot is taken on ``data`` at the end of ``fit`` (no loop was named).

        Example:
            >>> Predictions(data=[]).final_from_data, Predictions(data=[], from_stage="test").final_from_data
            (True, False)
        """
        return self.data is not None and self.from_stage in ("auto", None)

    def records_stage(self, stage: str) -> bool:
        """Whether the outputs of the user's ``test``/``predict`` loop are recorded.

        Example:
            >>> Predictions().records_stage("test"), Predictions(data=[]).records_stage("test")
            (True, False)
        """
        if self.from_stage == "auto":
            return self.data is None and stage in ("test", "predict")
        return self.from_stage == stage

    @property
    def groups_per_batch(self) -> bool:
        """Whether groups are read from each batch (a field name or a function) rather than given whole.

        Example:
            >>> Predictions(groups="sex").groups_per_batch, Predictions(groups={"sex": [0, 1]}).groups_per_batch
            (True, False)
        """
        return isinstance(self.groups, str) or callable(self.groups) or _is_names(self.groups)

    def check_sample_count(self, n: int) -> None:
        """Check, before any prediction, that ``data``'s ``n`` samples line up with groups given whole.

        The adapters call this when the number of samples in ``data`` is known without predicting (arrays, a
        DataLoader over a sized dataset), so that a mismatch stops the run before training rather than at the
        first snapshot.

        Raises:
            UsageError: ``data`` holds no samples, or a group array has another length.

        Example:
            >>> Predictions(data=[], groups={"sex": ["F", "M"]}).check_sample_count(3)
            Traceback (most recent call last):
            ...
            deviate_cb.errors.UsageError: Predictions(groups=...): groups['sex'] has 2 entries but `data` holds 3 ...
        """
        if n == 0:
            raise UsageError("DeviateCallback(predictions=Predictions(data=...)): `data` holds no samples.")
        if self.groups is None or self.groups_per_batch:
            return
        given = self.groups
        items = given.items() if isinstance(given, Mapping) else [("group", given)]
        for name, values in items:
            size = count_entries(values)
            if size is not None and size != n:
                raise UsageError(
                    f"Predictions(groups=...): groups[{name!r}] has {size} entries but `data` holds {n} samples; "
                    "give one group label per sample, in the order of `data`."
                )


@dataclass(frozen=True)
class Weights:
    """Record the final trained weights (``DeviateCallback(weights=Weights(...))``), at the end of ``fit``.

    Every weight (trainable and not: Lightning ``state_dict()`` floating-point entries in the module's
    registration order, buffers such as BatchNorm statistics included; Keras ``model.weights`` by path) is
    taken as float64. The store projects the concatenated, unit-normalised vector with a fixed random
    (Johnson-Lindenstrauss) projection to ``sketch_dim`` numbers: the same projection for every replica that
    uses the same ``sketch_seed``, so distances between replicas' sketches estimate their weight distances.

    Args:
        sketch_dim: Size of the sketch (more: a tighter distance estimate).
        sketch_seed: Seed of the projection; keep it the same across a study (it is not the run's seed).
        full: Also store the full flattened weights (``weights.npz``) for exact distances.

    Example:
        >>> Weights(sketch_dim=0)
        Traceback (most recent call last):
        ...
        deviate_cb.errors.UsageError: `sketch_dim` must be a positive integer. Received: sketch_dim=0.
    """

    sketch_dim: int = 256
    sketch_seed: int = 0
    full: bool = False

    def __post_init__(self) -> None:
        d = self.sketch_dim
        if isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 1:
            raise UsageError(f"`sketch_dim` must be a positive integer. Received: sketch_dim={d!r}.")
        s = self.sketch_seed
        if isinstance(s, bool) or not isinstance(s, numbers.Integral) or not 0 <= s < 2**32:
            raise UsageError(f"`sketch_seed` must be an integer in [0, 2**32). Received: sketch_seed={s!r}.")
        if not isinstance(self.full, bool):
            raise UsageError(f"`full` must be True or False. Received: full={self.full!r}.")


def parse_predictions(value: object, name: str = "predictions") -> Optional[Predictions]:
    """The callbacks' ``predictions`` argument as a :class:`Predictions` (``None`` when off).

    Example:
        >>> parse_predictions(True) == Predictions(), parse_predictions(None), parse_predictions(False)
        (True, None, None)
        >>> parse_predictions(3)
        Traceback (most recent call last):
        ...
        TypeError: `predictions` must be True, False, None or a ...Predictions. Received: predictions=3.
    """
    return _parse_switch(value, Predictions, name)


def parse_weights(value: object, name: str = "weights") -> Optional[Weights]:
    """The callbacks' ``weights`` argument as a :class:`Weights` (``None`` when off).

    Example:
        >>> parse_weights(True), parse_weights(False)
        (Weights(sketch_dim=256, sketch_seed=0, full=False), None)
    """
    return _parse_switch(value, Weights, name)


_Setting = TypeVar("_Setting", Predictions, Weights)


def _parse_switch(value: object, kind: type[_Setting], name: str) -> Optional[_Setting]:
    """``None``/``False`` -> off, ``True`` -> the defaults of ``kind``, an instance of ``kind`` as given."""
    if value is None or value is False:
        return None
    if value is True:
        return kind()
    if isinstance(value, kind):
        return value
    raise TypeError(
        f"`{name}` must be True, False, None or a deviate_cb.capture.stability.collector.{kind.__name__}. "
        f"Received: {name}={value!r}."
    )


def _check_groups(groups: object) -> None:
    if groups is None or callable(groups) or isinstance(groups, (str, np.ndarray)) or _is_names(groups):
        if isinstance(groups, str) and not groups:
            raise UsageError("`groups` must name a batch field. Received: groups=''.")
        return
    if isinstance(groups, Mapping):
        for name, values in groups.items():
            if not isinstance(name, str) or not name:
                raise UsageError(f"`groups` names must be non-empty strings. Received: {name!r}.")
            if isinstance(values, (str, bytes)) or callable(values) or not hasattr(values, "__len__"):
                raise UsageError(
                    f"`groups[{name!r}]` must be an array with one label per sample (in sample order). "
                    f"Received: {type(values).__name__}."
                )
        return
    raise UsageError(
        "`groups` must be a mapping name -> array, an array, a batch field name (or list of names) or a "
        f"function of the batch. Received: groups={groups!r}."
    )


def count_entries(values: object) -> Optional[int]:
    """The number of entries of an array or sequence (its first dimension), ``None`` if it has none.

    Example:
        >>> count_entries(np.zeros((3, 2))), count_entries(["F", "M"]), count_entries(np.float64(1.0))
        (3, 2, None)
    """
    try:
        shape = getattr(values, "shape", None)
        if shape is not None:
            first = shape[0] if len(shape) else None
            return None if first is None else int(first)  # a symbolic tensor's first dimension may be unknown
        return len(values)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _is_names(value: object) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(v, str) and v for v in value)
