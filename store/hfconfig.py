"""Model descriptions from disk: a Hugging Face config.json, or a built-in name.

The file reading lives here, not in models (which does no I/O beyond its own
package data); the parsing is models.llm.arch_from_config.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

from rooftop.models.llm.step import Arch, ModelError, arch_from_config, builtin_arch, builtin_models, served


def load_arch(ref: str) -> Arch:
    """A built-in model by name, or a config.json path (or a folder holding one)."""
    found = builtin_arch(ref)
    if found is not None:
        return found
    path = Path(ref)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelError(f"{ref} has no config.json; give a folder holding a Hugging Face config.json, the file "
                             f"itself, or a built-in model ({', '.join(builtin_models())})")
        path = path / "config.json"
    if not path.is_file():
        hub = builtin_arch(ref.rsplit("/", 1)[-1]) if ref.count("/") == 1 and not path.exists() else None
        if hub is not None:  # a hub id, mistralai/Mistral-7B-v0.1, of a built-in
            return hub
        near = difflib.get_close_matches(ref.lower(), list(builtin_models()), n=1, cutoff=0.6)
        hint = f"did you mean {near[0]}? " if near else ""
        raise ModelError(f"unknown model {ref!r}: {hint}not a built-in ({', '.join(builtin_models())}) nor a "
                         "config.json path")
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"cannot read {path}: {exc}") from None
    except RecursionError:
        raise ModelError(f"cannot read {path}: JSON nested too deeply for a config.json") from None
    except ValueError as exc:  # an integer of more digits than Python converts (4300)
        raise ModelError(f"cannot read {path}: {exc}".splitlines()[0]) from None
    if not isinstance(cfg, dict):
        raise ModelError(f"{path} is not a config.json object")
    return served(arch_from_config(cfg, model_name(path, cfg)), cfg)


# folder names that say where a config is kept, not which model it is (a checkout's `configs/`, a training run's
# `checkpoint-500/`, a snapshot named by its commit, a temporary folder)
GENERIC_FOLDERS = frozenset((
    "config", "configs", "cfg", "conf", "model", "models", "checkpoint", "checkpoints", "ckpt", "ckpts", "snapshot",
    "snapshots", "weights", "hf", "huggingface", "hub", "output", "outputs", "out", "export", "exported", "final",
    "latest", "best", "last", "tmp", "temp", "data", "files", "download", "downloads", "src", "work", "run", "runs",
))
_GENERIC = re.compile(r"^(?:[0-9a-f]{7,64}|(?:checkpoint|ckpt|step|global_step|epoch|iter|run)[-_]?\d+|v?\d+(?:\.\d+)*"
                      r"|tmp[\w.-]*)$", re.IGNORECASE)


def generic_folder(name: str) -> bool:
    """A folder name that says where a config is kept rather than which model it holds."""
    return not name.strip(" ./\\") or name.lower() in GENERIC_FOLDERS or bool(_GENERIC.match(name))


def config_family(cfg: dict) -> str:
    """The model's kind as its config names it: `model_type` (mistral), else its first architecture less the
    head (MistralForCausalLM → Mistral), else 'model'."""
    kind = cfg.get("model_type")
    if isinstance(kind, str) and kind.strip():
        return kind.strip()
    archs = cfg.get("architectures")
    if isinstance(archs, list) and archs and isinstance(archs[0], str) and archs[0].strip():
        head = re.split(r"For(?=[A-Z])", archs[0].strip(), maxsplit=1)[0]
        return head.removesuffix("Model") or archs[0].strip()
    return "model"


def model_name(path: Path, cfg: dict) -> str:
    """What to call a model read from a file: the name its config gives (`_name_or_path`, as
    `save_pretrained` writes it); else a file's own name when it is not `config.json`; else, in the Hugging
    Face cache (`models--org--name/snapshots/<commit>/config.json`), `org/name`; else its folder's name, unless
    that names where configs are kept (`configs/`, `checkpoint-500/`, a commit, a temporary folder): then the
    config's own kind (`model_type`, else its architecture). A local `_name_or_path` is read the same way."""
    given = cfg.get("_name_or_path")
    if isinstance(given, str) and given.strip().rstrip("/\\"):
        given = given.strip().rstrip("/\\")
        local = given.startswith(("/", ".", "~")) or "\\" in given or given.count("/") > 1
        if not local:
            return given  # a hub id (org/name) stays whole
        last = Path(given.replace("\\", "/")).name
        if not generic_folder(last):
            return last
    if path.name != "config.json" and not generic_folder(path.stem):
        return path.stem  # mistral-7b.json (model.json says no more than config.json)
    folder = path.resolve().parent
    if folder.parent.name == "snapshots" and folder.parent.parent.name.startswith("models--"):
        return folder.parent.parent.name.removeprefix("models--").replace("--", "/")
    return config_family(cfg) if generic_folder(folder.name) else folder.name
