"""Files on disk; ``from core.saving import X`` works for every public name below.

``files`` reads what someone else may have written; ``atomic`` replaces a folder whole, only the lab's files in it
(``owned_files``, ``temp_files``); ``model_folder`` is the model's schema (``calibrated``: a calibrated copy);
``output`` claims where a training writes (``locks``); ``runs`` lists the runs; ``user_files`` writes a file the
user named; ``label_store`` keeps labels, ``workspaces`` each person's folder.
"""
from core.saving.atomic import OLD_PREFIX, RECORD_FILE, ForeignFilesError, write_folder_atomically
from core.saving.files import (
    CONFIG_MAX_BYTES,
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
    list_runs,
    read_config,
    read_weights,
    save_model,
    weights_max_bytes,
)
from core.saving.output import OutputClaim, OutputError, claim_new_run, claim_output
from core.saving.temp_files import TEMP_PREFIX
from core.saving.user_files import FileClaim, UserFileError, claim_files

__all__ = [
    "CONFIG_FILE", "CONFIG_MAX_BYTES", "FORMAT", "FORMAT_VERSION", "FileClaim", "ForeignFilesError",
    "MODEL_FILES", "ModelLoadError", "OLD_PREFIX", "OutputClaim", "OutputError", "RECORD_FILE", "TEMP_PREFIX",
    "UserFileError", "VOCAB_MAX_BYTES", "WEIGHTS_FILE", "check_metadata", "check_regular_file",
    "claim_files", "claim_new_run", "claim_output", "config_from_dict", "list_runs", "read_config", "read_json_file",
    "read_regular_file", "read_weights", "save_model", "weights_max_bytes", "write_folder_atomically",
]
