"""Model folders on disk, in four layers; ``from core.saving import X`` works for every public name.

* ``files``: how any file of a folder someone else may have written is read: ``read_regular_file`` /
  ``check_regular_file`` open regular files only (a FIFO or a device is refused, never waited on),
  inside the folder, under a size cap; ``read_json_file`` also bounds the nesting.

* ``atomic``: ``write_folder_atomically`` replaces a folder so that a crash at any moment leaves the
  previous content or the new one, whole (its docstring states the guarantees), replacing only what
  the lab wrote: ``owned_files`` records a folder's own files and carries the user's into the new one;
  ``temp_files`` names every temporary (file or folder) after its writer and removes those whose writer is gone.
* ``model_folder``: the schema (``config.json`` + ``model.safetensors`` + vocabulary): ``save_model``
  and the checked readers (``read_config``, ``config_from_dict``, ``read_weights``)
  that ``core.models.load_model`` builds a model from; nothing is ever unpickled or run from the folder.
* ``calibrated``: a calibrated copy, a config.json that points at its parent's weights (``calibrated_from``, with
  the digest of the parent's files) and holds thresholds calibrated on a labelled file; ``model_folder`` writes it.
* ``output``: where a training may write: ``claim_output`` / ``claim_new_run`` refuse paths that are not
  ours, replace a model only with ``overwrite``, and lock the folder for one writer, all before training.
* ``locks``: the one lock the lab takes on a path (``take_lock``, an ``flock`` through ``filelock``), which never
  writes or removes a file of the lock's name that the lab did not create.
* ``cache_seal``: a cache's own key, and the seal an entry's ``meta.json`` carries, so an entry edited after the
  lab wrote it is never used.
* ``runs``: the runs folder: run names, ``list_runs`` and ``recover_interrupted_saves``.
* ``user_files``: the one way a command writes a file the user named: ``claim_files`` claims every
  output before any work (an existing file or link only with ``overwrite``, never followed), writes
  temporaries of its own beside them and renames them into place whole; on any failure one
  ``UserFileError`` and the old files untouched. ``write_file_atomically`` is every whole-file write on it.
"""
from core.saving.atomic import OLD_PREFIX, write_folder_atomically
from core.saving.files import (
    CONFIG_MAX_BYTES,
    JSON_MAX_DEPTH,
    VOCAB_MAX_BYTES,
    check_regular_file,
    read_json_file,
    read_regular_file,
)
from core.saving.model_folder import (
    CONFIG_FILE,
    FORMAT,
    FORMAT_VERSION,
    MODEL_FILES,
    WEIGHTS_FILE,
    ModelLoadError,
    check_metadata,
    config_from_dict,
    read_config,
    read_weights,
    save_model,
    weights_max_bytes,
)
from core.saving.output import OutputClaim, OutputError, claim_new_run, claim_output
from core.saving.owned_files import RECORD_FILE, CarryOverError
from core.saving.runs import (
    check_run_name,
    list_runs,
    recover_interrupted_saves,
    run_folder,
)
from core.saving.temp_files import TEMP_PREFIX
from core.saving.user_files import FileClaim, UserFileError, claim_files

__all__ = [
    "CONFIG_FILE", "FORMAT", "FORMAT_VERSION", "OLD_PREFIX", "TEMP_PREFIX", "WEIGHTS_FILE", "ModelLoadError",
    "MODEL_FILES", "RECORD_FILE", "CarryOverError",
    "check_run_name", "config_from_dict", "list_runs", "read_config", "OutputClaim", "OutputError", "claim_new_run", "claim_output",
    "read_weights", "recover_interrupted_saves", "run_folder", "save_model",
    "write_folder_atomically",
    "CONFIG_MAX_BYTES", "JSON_MAX_DEPTH", "VOCAB_MAX_BYTES", "check_metadata", "check_regular_file",
    "read_json_file", "read_regular_file", "weights_max_bytes",
    "FileClaim", "UserFileError", "claim_files",
]
