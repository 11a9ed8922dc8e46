"""Files on disk; ``from core.saving import X`` works for every name below (the modules: docs/ARCHITECTURE.md)."""
from core.saving.atomic import RECORD_FILE, ForeignFilesError, write_folder_atomically
from core.saving.files import VOCAB_MAX_BYTES, check_regular_file, read_json_file, read_regular_file
from core.saving.model_folder import (
    CONFIG_FILE,
    WEIGHTS_FILE,
    ModelLoadError,
    config_from_dict,
    list_runs,
    read_config,
    read_weights,
    save_model,
    weights_max_bytes,
)
from core.saving.output import OutputClaim, OutputError, claim_new_run, claim_output
