"""What every page shares: the model registry in Streamlit's caches, cached traces, error messages."""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st

from explorer.errors import ExplorerError
from explorer.limits import LIMITS, PARSED_TSV_FACTOR
from explorer.app.engine_link import engine_module

model_registry = engine_module("explorer.checkpoints.registry")
first_trace = engine_module("explorer.app.first_trace")


@st.cache_resource(show_spinner=False)
def shipped_model(name: str):
    """A shipped model, loaded once for all sessions; never mutate it (train a private copy)."""
    return model_registry.load_shipped(name)


@st.cache_resource(show_spinner=False)
def shipped_model_names() -> list[str]:
    return model_registry.shipped_names()


def session_models() -> model_registry.SessionModels:
    """This session's own models (trained or uploaded)."""
    if "models" not in st.session_state:
        st.session_state["models"] = model_registry.SessionModels()
    return st.session_state["models"]


def model_names() -> list[str]:
    """Shipped models first, then this session's."""
    return shipped_model_names() + session_models().names()


def is_shipped(name: str) -> bool:
    """Whether `name` is one of the shipped models (a session's own models never take a shipped name)."""
    return session_models().get(name) is None and name in shipped_model_names()


def get_model(name: str):
    """A model by name (session models shadow nothing: their names are kept unique)."""
    own = session_models().get(name)
    if own is not None:
        return own
    if name in shipped_model_names():
        return shipped_model(name)
    raise ExplorerError(f"no model named {name!r}")


def model_or_none(name: str):
    """The model named `name`, or None where there is none (or it cannot be loaded)."""
    try:
        return get_model(name)
    except ExplorerError:
        return None


def model_key(name: str) -> tuple[str, int]:
    """A cache key that changes when a session model is replaced (e.g. a new training snapshot)."""
    return name, session_models().version(name)


def _trace_cache() -> model_registry.LRUCache:
    if "trace_cache" not in st.session_state:
        st.session_state["trace_cache"] = model_registry.LRUCache(64)
    return st.session_state["trace_cache"]


def cached_trace(name: str, text: str, intervention: Any = None, target: str | None = None):
    """The trace of an input, computed once per (model version, input, intervention, target)."""
    from explorer.record import Intervention
    intervention = intervention or Intervention()
    key = ("trace", model_key(name), text, intervention, target)
    return _trace_cache().get_or_compute(key, lambda: _trace(get_model(name), text, intervention, target))


def _trace(bundle: Any, text: str, intervention: Any, target: str | None):
    """A shipped model's first trace as stored beside it (no torch needed), any other traced."""
    if target is None and intervention.is_identity:
        stored = first_trace.read(bundle, text)
        if stored is not None:
            return stored
    from explorer.engine.trace import trace
    return trace(bundle, text, intervention, target)


def cached(key: tuple, compute):
    """Any other per-session cached computation (curves, beams)."""
    return _trace_cache().get_or_compute(key, compute)


class _ParsedUploads:
    """What the server read from uploaded files, kept once per server (keyed by content), least recently used first
    out, within a budget of bytes shared by every session and counted in the server's memory budget
    (limits.uploads_budget: training jobs get the rest). A refusal is kept too, so a rerun does not read again.
    Ours: functools' and Streamlit's caches count entries, not bytes; cachetools (getsizeof) is not installed."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes, self.used = max_bytes, 0
        self._lock = threading.Lock()
        self._data: OrderedDict[tuple[str, str, str], tuple[Any, int]] = OrderedDict()

    def keep(self, data: bytes, name: str) -> str:
        """Hold an uploaded file's bytes (their sha256 returned), within the budget; ExplorerError when they
        cannot fit."""
        digest = hashlib.sha256(data).hexdigest()
        self.get(digest, name, "bytes", lambda: data, peak=len(data))
        with self._lock:
            if (digest, name, "bytes") not in self._data:
                raise ExplorerError(f"{name} ({len(data) / 1e6:,.1f} MB) does not fit in the "
                                    f"{self.max_bytes / 1e6:,.0f} MB the server keeps for uploads: use a smaller file")
        return digest

    def held(self, digest: str, name: str) -> bytes:
        """The bytes `keep` holds under this digest and name; ExplorerError when room was made for others."""
        with self._lock:
            entry = self._data.get((digest, name, "bytes"))
            if entry is not None:
                self._data.move_to_end((digest, name, "bytes"))
                return entry[0]
        raise ExplorerError(f"the server no longer holds {name} (room was made for newer uploads): upload it again")

    def get(self, digest: str, name: str, what: str, read, peak: int, size: int | None = None) -> Any:
        """`read()`'s result (or its ExplorerError, raised) for the file of this sha256 and name and `what` was
        read: room is made for the `peak` bytes reading takes before it starts, and the result kept at `size`
        (default `peak`) bytes when it fits."""
        key = (digest, name, what)
        with self._lock:  # one read at a time: concurrent uploads do not stack their peaks either
            if key in self._data:
                self._data.move_to_end(key)
                kept = self._data[key][0]
            else:
                if peak > self.max_bytes:
                    raise ExplorerError(f"{name} would take about {peak / 1e6:,.0f} MB of server memory to read; the "
                                        f"server keeps {self.max_bytes / 1e6:,.0f} MB for uploads: use a smaller file")
                while self._data and self.used + peak > self.max_bytes:
                    self.used -= self._data.popitem(last=False)[1][1]
                size = peak if size is None else size
                try:
                    kept = read()
                except ExplorerError as exc:
                    kept, size = exc, _REFUSAL_BYTES
                if self.used + size <= self.max_bytes:
                    self._data[key] = (kept, size)
                    self.used += size
        if isinstance(kept, ExplorerError):
            raise ExplorerError(str(kept))
        return kept


_REFUSAL_BYTES = 2_000  # a kept refusal: its message
_CHECK_BYTES = 2_000  # a kept check (corpus.FileCheck): a count and the note on skipped lines


@st.cache_resource(show_spinner=False)
def parsed_uploads() -> _ParsedUploads:
    """The server's one store of what it read from uploads (limits.uploads_budget: EXPLORER_PARSED_TSV_MB)."""
    from explorer.limits import uploads_budget
    return _ParsedUploads(uploads_budget())


@dataclass(frozen=True)
class KeptUpload:
    """An uploaded file as the pages use it once `take_upload` moved its bytes into the server's one store."""
    name: str
    file_id: str  # the bytes' sha256
    size: int

    def getvalue(self) -> bytes:
        return parsed_uploads().held(self.file_id, self.name)


def uploader_key(key: str) -> str:
    """The widget key of upload box `key`: a new one after each file taken, so the box is empty again."""
    return f"{key}_box{st.session_state.get(f'{key}_round', 0)}"


def take_upload(key: str, keep: bool = True, use=None, limit: int | None = None) -> None:
    """Move the file in upload box `key` out of Streamlit's per-session memory: its bytes into the server's one
    store within the uploads' budget (`keep`), or only to `use(kept, data)`; Streamlit's copy dropped and the box
    emptied. st.session_state[key] becomes the KeptUpload, or None with the refusal in f"{key}_refused"."""
    ss = st.session_state
    box = ss.get(uploader_key(key))
    if box is None:
        return
    data = box.getvalue()
    ss.pop(f"{key}_refused", None)
    try:
        if limit is not None and len(data) > limit:
            raise ExplorerError(f"{box.name} is too large: {len(data):,} bytes (limit {limit:,})")
        digest = parsed_uploads().keep(data, box.name) if keep else hashlib.sha256(data).hexdigest()
        ss[key] = KeptUpload(box.name, digest, len(data))
        if use is not None:
            use(ss[key], data)
    except ExplorerError as exc:
        ss[key] = None
        ss[f"{key}_refused"] = str(exc)
    finally:
        _drop_streamlit_copy(box.file_id)
        ss[f"{key}_round"] = ss.get(f"{key}_round", 0) + 1


def _drop_streamlit_copy(file_id: str) -> None:
    """Streamlit keeps an upload's bytes for the session until the browser removes it; the box's widget goes with
    the new key, and this frees the manager's copy (only its in-memory manager has remove_file, as st.chat_input
    relies on)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx
    ctx = get_script_run_ctx()
    remove = getattr(getattr(ctx, "uploaded_file_mgr", None), "remove_file", None)
    if remove is not None:
        remove(session_id=ctx.session_id, file_id=file_id)


def kept_upload_line(key: str, what: str, refused: str = "This file cannot be used") -> None:
    """Under an upload box: the file the page holds (with a button to let it go) or why it was refused."""
    ss = st.session_state
    if ss.get(f"{key}_refused"):
        st.error(f"{refused}: {ss[f'{key}_refused']}", icon=":material/warning:")
    kept = ss.get(key)
    if kept is None:
        return
    st.markdown(f"{what}: **{literal(kept.name)}** ({kept.size / 1e6:,.2f} MB)")
    st.button("Remove", key=f"{key}_remove", on_click=lambda: ss.update({key: None}))  # below: boxes are narrow


def literal(text: str) -> str:
    """Text shown as typed inside Streamlit markdown (a file name with `*`, `[`, `$` or `<` in it)."""
    return re.sub(r"([\\`*_{}\[\]()#+\-.!<>|~$:])", r"\\\1", text)


def checked_tsv(upload: KeptUpload) -> Any:
    """The Train page's check of an uploaded TSV (corpus.FileCheck: pairs counted, skipped lines said;
    ExplorerError when it holds no pairs): read one line at a time, no pair kept, once per server."""
    from explorer.data.corpus import check_tsv_bytes
    data = upload.getvalue()
    return parsed_uploads().get(upload.file_id, upload.name, "check",
                                lambda: check_tsv_bytes(data, upload.name, LIMITS.max_tsv_bytes),
                                peak=len(data), size=_CHECK_BYTES)  # its peak: the longest line, at most the file


def uploaded_pairs(upload: KeptUpload) -> tuple[tuple[str, str], ...]:
    """An uploaded TSV's pairs (ExplorerError when it holds none), parsed once per server and kept within the
    shared budget at limits.PARSED_TSV_FACTOR times the file's size (Compare scores models on them)."""
    from explorer.data.corpus import load_tsv_bytes
    data = upload.getvalue()
    return parsed_uploads().get(upload.file_id, upload.name, "pairs",
                                lambda: load_tsv_bytes(data, upload.name, LIMITS.max_tsv_bytes).pairs,
                                peak=PARSED_TSV_FACTOR * len(data))


def show_problem(exc: Exception) -> None:
    """Bad input becomes a message, never a traceback."""
    if isinstance(exc, ExplorerError):
        st.error(str(exc), icon=":material/warning:")
    else:
        st.error(f"Something went wrong: {type(exc).__name__}: {exc}", icon=":material/error:")


@st.cache_resource(show_spinner=False, max_entries=64)
def _shipped_curve(name: str, lengths: tuple[int, ...], samples: int, seed: int):
    """Accuracy by length of a shipped model: read from the curves stored for that exact checkpoint
    file, else computed once per server (shipped models never change)."""
    from explorer.checkpoints import checkpoint
    from explorer.training.comparison import length_curve, stored_curve
    stored = stored_curve(checkpoint.resolve(name), lengths, samples, seed)
    return stored if stored is not None else length_curve(shipped_model(name), lengths, samples, seed)


def accuracy_curve(name: str, lengths: tuple[int, ...] | None = None, samples: int | None = None,
                   seed: int | None = None):
    """A model's accuracy-by-length Curve: shared across sessions for shipped models, per session otherwise."""
    from explorer.training import comparison
    lengths = tuple(lengths or comparison.CURVE_LENGTHS)
    samples = samples or comparison.CURVE_SAMPLES
    seed = comparison.CURVE_SEED if seed is None else seed
    if session_models().get(name) is None and name in shipped_model_names():
        return _shipped_curve(name, lengths, samples, seed)
    return cached(("curve", model_key(name), lengths, samples, seed),
                  lambda: comparison.length_curve(get_model(name), lengths, samples, seed))


def shipped_bleu_curves() -> list:
    """The stored BLEU-by-length curves of the shipped translation models (read once per server and folder)."""
    from explorer.checkpoints import checkpoint
    return _stored_bleu_curves(str(checkpoint.PRETRAINED_DIR), tuple(shipped_model_names()))


@st.cache_resource(show_spinner=False)
def _stored_bleu_curves(folder: str, names: tuple[str, ...]) -> list:
    from explorer.training.comparison import stored_bleu_curve
    curves = [stored_bleu_curve(Path(folder) / f"{name}.safetensors") for name in names]
    return [c for c in curves if c is not None]


def selected_points(event: Any) -> list[tuple[dict, list]]:
    """The points of a chart's selection event, each with its customdata as a list ([] when absent): the
    browser sends a typed array as {"0": a, "1": b, ...}, AppTest and older clients a list."""
    try:
        points = event["selection"]["points"]
    except (KeyError, TypeError):
        return []
    out = []
    for point in points or []:
        data = point.get("customdata")
        if isinstance(data, dict):
            data = [data.get(str(k)) for k in range(len(data))]
        out.append((point, list(data) if data is not None else []))
    return out


def explore_link(label: str, model: str, text: str, step: int | None = None, faithfulness: bool = False) -> None:
    """A link that opens the Explore page on this model, input and decoder step (1-based, as Explore reads it),
    with its "Is attention the explanation?" section open when `faithfulness`."""
    from explorer.app.pages.addresses import explore_target
    params = {"model": model, "input": text}
    if step is not None:
        params["step"] = str(step)
    if faithfulness:
        params["explore_faith"] = "true"
    st.page_link(explore_target(), label=label, icon=":material/search:", query_params=params)


def chart(where: Any, fig: Any, *, key: str, config: dict | None = None, ready: bool = False, **kwargs: Any):
    """Draw a Plotly figure in `where` (st or a column): our fonts and colours (theme=None: Streamlit's
    chart theme would shrink labels to 12.75 px and recolour scales), a PNG camera, projector-sized
    type in presenter mode (`ready`: `fig` is already that copy, e.g. a cached one)."""
    from explorer.app.figures.style import plotly_config, presented
    from explorer.app.pages import presenter
    if presenter.on() and not ready:
        fig = presented(fig)
    return where.plotly_chart(fig, key=key, config=config or plotly_config(key), theme=None, **kwargs)
