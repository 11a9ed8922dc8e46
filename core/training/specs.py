"""What a training run is: ``RunSpec``, and ``spec_from_options``, the one place that builds and checks it from the
flat options of the CLI and the Train page (a preset under them, then the family's defaults); an error names the
option (``SpecError.option``: the CLI says ``--batch-size``, the page "Batch size").
"""
from __future__ import annotations

import dataclasses
import math
import operator
from dataclasses import dataclass, field

from core.data import SPLIT_BY
from core.device import PRECISIONS
from core.model_names import CROSS_ENCODER
from core.models import MODEL_NAMES, MODEL_TYPES, ZERO_SHOT, ModelTooLarge, check_model_size
from core.training.objectives import (
    CONTRASTIVE_FORMS,
    DEFAULT_MARGINS,
    LOSS_NAMES,
    LossConfig,
)
from core.training.presets import PRESETS
from core.training.trainer import TrainConfig


@dataclass
class RunSpec:
    """One run, as ``spec_from_options`` builds and checks it."""

    model: str = "lstm"  # lstm | dual-transformer | minilm | cross-encoder
    loss: LossConfig = field(default_factory=LossConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    model_options: dict = field(default_factory=dict)  # fields of the model's config (e.g. hidden_size)
    max_length: int = 64  # tokens per question
    min_freq: int = 1  # LSTM vocabulary: words seen fewer times become <unk> (max_vocab keeps the most frequent)
    max_vocab: int = 30000  # LSTM vocabulary size, <pad> and <unk> included
    val_fraction: float = 0.1  # share of pairs held out to pick the best epoch and calibrate thresholds
    test_fraction: float = 0.0  # share of pairs held out for a final test report (0 = none)
    # auto | pair | question (core.data.SPLIT_BY): "question" keeps pairs linked by a shared question on one side;
    # auto picks it when any question repeats.
    split_by: str = "auto"
    group_column: str = ""  # a column of --data whose groups (a URL, a topic) are each held on one side of the split
    hard_negatives: bool = False  # triplet/softmax: add labelled non-duplicates as extra negatives
    # triplet/softmax: also non-duplicates mined once from the training questions with the starting model (implies
    # hard_negatives)
    mine_negatives: bool = False
    implied_pairs: bool = False  # also train on the pairs the training labels imply (core.data.splitting)
    keep_unvalidated: bool = False  # save a run cancelled before its first validation (else nothing is saved)
    data_name: str = ""  # shown in the runs list
    val_data_name: str = ""  # the file the validation pairs came from, when the user gave one ("" = split off)
    test_data_name: str = ""  # likewise for the test pairs
    init_model: str = ""  # a saved model folder to start from, its architecture and vocabulary kept
    base_model: str = ""  # a local BERT folder a minilm run fine-tunes instead of the bundled MiniLM (absolute path)


class SpecError(ValueError):
    """An option that cannot make a run: ``option`` names it, ``problem`` says what is wrong ("must be at least 2,
    got 1"); ``str(error)`` is ``"batch_size must ..."``."""

    def __init__(self, option: str, problem: str):
        super().__init__(f"{option} {problem}")
        self.option, self.problem = option, problem


# ---- menus ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SizeOption:
    field: str  # the model config field it sets
    label: str
    low: int | None = None  # bounds of a number; None for an on/off switch
    high: int | None = None
    step: int = 1
    help: str = ""


SIZE_OPTIONS: dict[str, tuple[SizeOption, ...]] = {
    "lstm": (
        SizeOption("embedding_dim", "Embedding size", 2, 1024, 16),
        SizeOption("hidden_size", "Hidden size", 2, 1024, 16),
        SizeOption("num_layers", "LSTM layers", 1, 4),
        SizeOption("bidirectional", "Bidirectional"),
    ),
    "dual-transformer": (
        SizeOption("d_model", "d_model", 8, 1024, 32),
        SizeOption("num_layers", "Layers", 1, 12),
        SizeOption("num_heads", "Heads", 1, 16, help="Must divide d_model."),
        SizeOption("ff_dim", "Feed-forward width", 8, 8192, 64),
        SizeOption("projection_dim", "Projection size", 2, 1024, 16),
    ),
    "minilm": (),  # the pretrained architecture is kept; only its weights are fine-tuned
    "cross-encoder": (),  # MiniLM's, with a logit head
}

# Set from the tokenizer when the model is built, never by the user.
_DERIVED_MODEL_FIELDS = frozenset({"vocab_size", "pad_id", "max_length", "bert"})

# Training settings that work for each family on a CPU (docs/BENCHMARKS.md, "Better defaults").
TRAINING_DEFAULTS: dict[str, dict] = {
    "lstm": {"epochs": 10, "batch_size": 64, "lr": 1e-2, "patience": 3},
    "dual-transformer": {"epochs": 5, "batch_size": 32, "lr": 1e-4, "patience": 2},
    "minilm": {"epochs": 1, "batch_size": 32, "lr": 2e-5, "patience": 2},
    "cross-encoder": {"epochs": 1, "batch_size": 32, "lr": 5e-5, "patience": 2},
}
PRETRAINED_MODELS = ("minilm", CROSS_ENCODER)  # the families that start from MiniLM's weights, their size fixed
CROSS_ENCODER_LOSS = "bce"  # the cross-encoder's one loss, and no other family's


def size_defaults(model: str) -> dict:
    """The user-settable model sizes of a family, read from its config dataclass."""
    defaults = {f.name: f.default for f in dataclasses.fields(MODEL_TYPES[model].config_class)}
    return {option.field: defaults[option.field] for option in SIZE_OPTIONS[model]}


# ---- validation ----------------------------------------------------------------------------------
# Each option's rule: its named choices (a tuple of names), its bounds (low, high: whole numbers when both are ints;
# "above" after them refuses the low bound itself), or the type it must have (bool, str or dict).
_RULES: dict[str, tuple | type] = {
    # what is trained
    "model": MODEL_NAMES,
    "model_options": dict,
    "loss": LOSS_NAMES,
    "form": CONTRASTIVE_FORMS,
    "margin": (0.0, 4.0),
    "scale": (0.0, 1000.0, "above"),
    "weight": (0.0, 1000.0),  # multitask: 0 leaves the contrastive term alone
    "hard_negatives": bool,
    "mine_negatives": bool,
    "implied_pairs": bool,
    # data
    "max_length": (4, 512),
    "min_freq": (1, 1_000_000),
    "max_vocab": (3, 10_000_000),
    "val_fraction": (0.0, 0.5),
    "test_fraction": (0.0, 0.5),
    "split_by": SPLIT_BY,
    "group_column": str,
    "data_name": str,
    "val_data_name": str,
    "test_data_name": str,
    "init_model": str,  # a saved model folder; "" or ZERO_SHOT = the family's usual start
    "base_model": str,  # a local BERT folder for minilm to start from; "" = the bundled MiniLM
    "keep_unvalidated": bool,
    # training (TrainConfig)
    "epochs": (1, 10_000),
    "batch_size": (2, 65_536),
    "lr": (0.0, 10.0, "above"),
    "weight_decay": (0.0, 10.0),
    "warmup_ratio": (0.0, 1.0),
    "grad_clip": (0.0, 1e6),
    "seed": (0, 2**31 - 1),
    "device": ("auto", "cpu", "cuda"),
    "precision": PRECISIONS,  # auto | fp32 | bf16 | fp16 (core.training.trainer.autocast_plan)
    "compile": bool,  # torch.compile the step's forward pass
    "patience": (0, 1000),
    "max_val_pairs": (1, 10_000_000),
    "validate_every": (0, 1_000_000_000),  # steps between validations inside an epoch; 0 = per epoch
    "max_steps": (0, 1_000_000_000),
    "max_minutes": (0.0, 525_600.0),  # up to a year; 0 = no time budget
    "length_buckets": bool,
}
OPTION_NAMES = tuple(_RULES)
_LOSS_FIELDS = {"loss": "name", "margin": "margin", "form": "form", "scale": "scale", "weight": "weight"}
_TRAIN_FIELDS = {f.name for f in dataclasses.fields(TrainConfig)}
_RUN_FIELDS = {f.name for f in dataclasses.fields(RunSpec)} - {"loss", "train"}
# Recipe parts that belong to one model family or one loss: a preset's values for them are dropped
# when its model (or loss) is overridden by another.
_PER_MODEL = ("model_options", *TRAINING_DEFAULTS["lstm"])
_PER_LOSS = ("margin", "form", "scale", "weight")


_KINDS = {bool: "true or false", str: "a text", dict: "a mapping"}


def _checked(name: str, value, rule: tuple | type | None = None):
    """``value`` as ``rule`` (``_RULES[name]``'s by default) takes it; ``SpecError`` naming ``name`` otherwise."""
    rule = _RULES[name] if rule is None else rule
    if isinstance(rule, type):
        if not isinstance(value, rule):
            raise SpecError(name, f"must be {_KINDS[rule]}, got {value!r}")
        return value
    if isinstance(rule[0], str):
        if value not in rule:
            raise SpecError(name, f"must be one of {', '.join(rule)}, got {value!r}")
        return value
    low, high, *above = rule
    if isinstance(value, bool):
        raise SpecError(name, f"must be a number, got {value!r}")
    if isinstance(low, int) and isinstance(high, int):
        try:
            value = operator.index(value)
        except TypeError:
            raise SpecError(name, f"must be a whole number, got {value!r}") from None
    elif isinstance(value, (int, float)) and math.isfinite(value):
        value = float(value)
    else:
        raise SpecError(name, f"must be a finite number, got {value!r}")
    if not low <= value <= high or (above and value == low):
        raise SpecError(name, f"must be {'above' if above else 'at least'} {low:g} and at most {high:g}, got {value:g}")
    return value


def _checked_model_options(model: str, options: dict) -> dict:
    config_class = MODEL_TYPES[model].config_class
    fields = {f.name: f for f in dataclasses.fields(config_class)}
    sizes = {option.field: option for option in SIZE_OPTIONS[model]}
    checked = {}
    for name, value in options.items():
        if name not in fields or name in _DERIVED_MODEL_FIELDS:
            settable = sorted(set(fields) - _DERIVED_MODEL_FIELDS)
            raise SpecError("model_options", f"has {name!r}, which is not a setting of the {model} model; "
                                             f"its settings are {', '.join(settable) if settable else 'none'}")
        default = fields[name].default
        choices = fields[name].metadata.get("choices")  # a setting of named values, declared on its field
        if choices:
            rule = tuple(choices)
        elif isinstance(default, str):
            rule = str
        elif name in sizes and sizes[name].low is not None:
            rule = (sizes[name].low, sizes[name].high)
        elif isinstance(default, bool):
            rule = bool
        else:  # dropout-like rates, else counts
            rule = (0.0, 0.9) if isinstance(default, float) else (1, 100_000)
        try:
            checked[name] = _checked(name, value, rule)
        except SpecError as error:
            raise SpecError("model_options", f"field {name} {error.problem}") from None
    try:  # cross-field rules of the config itself (e.g. heads must divide d_model)
        config_class(**checked)
    except (TypeError, ValueError) as error:
        raise SpecError("model_options", f"are inconsistent: {error}") from None
    return checked


def _check_model_size(model: str, values: dict) -> None:
    """Refuse, before anything is allocated, a model whose parameters would pass the size limit."""
    if model in PRETRAINED_MODELS:
        return  # the pretrained architecture: its size is fixed
    fields = dict(values["model_options"])
    if model == "lstm":  # the word vocabulary is not built yet: count its largest possible size
        from core.models.siamese_lstm import WORDPIECE_VOCAB_SIZE

        wordpiece = fields.get("tokens") == "wordpiece"  # BERT's vocabulary, whatever max_vocab says
        fields["vocab_size"] = WORDPIECE_VOCAB_SIZE if wordpiece else values.get("max_vocab", RunSpec.max_vocab)
    try:
        check_model_size(model, MODEL_TYPES[model].config_class(**fields))
    except ModelTooLarge as error:
        raise SpecError("model_options", f"make the model too large: {error}") from None


def init_model_family(source: str) -> str:
    """The family of ``init_model`` (a saved model folder; ZERO_SHOT: the pretrained MiniLM); SpecError if none."""
    from core.saving import ModelLoadError, read_config

    if source == ZERO_SHOT:
        return "minilm"
    try:
        return read_config(source)["model_type"]
    except ModelLoadError as error:
        raise SpecError("init_model", f"cannot be used: {error}") from None


def _checked_base_model(folder: str, model: str, init_model: str) -> str:
    """``folder``'s absolute path once ``check_base_folder`` passes it, for a run that takes no other start."""
    import os

    from core.models.base_folder import check_base_folder
    from core.saving import ModelLoadError

    if model not in PRETRAINED_MODELS:
        raise SpecError("base_model", f"is the encoder a minilm or cross-encoder run starts from; the run's model is "
                                      f"{model}")
    if init_model:
        raise SpecError("base_model", "and init_model both say where the weights come from; give one of them")
    try:
        check_base_folder(folder)
    except ModelLoadError as error:
        raise SpecError("base_model", f"cannot be used: {error}") from None
    return os.path.abspath(folder)


# ---- the builder ---------------------------------------------------------------------------------
def spec_from_options(preset: str | None = None, **options) -> RunSpec:
    """The run that ``options`` describe over ``preset`` (then the model's defaults); ``SpecError`` names the first
    bad option. A preset's model or loss settings are dropped when ``model`` or ``loss`` names another one."""
    unknown = sorted(set(options) - set(OPTION_NAMES))
    if unknown:
        raise SpecError(unknown[0], f"is not an option; the options are {', '.join(OPTION_NAMES)}")
    if preset is not None and preset not in PRESETS:
        raise SpecError("preset", f"must be one of {', '.join(PRESETS)}, got {preset!r}")
    given = {name: value for name, value in options.items() if value is not None}
    base = dict(PRESETS[preset].options) if preset else {}
    model = _checked("model", given.get("model", base.get("model", "lstm")))
    if model == CROSS_ENCODER:  # a preset's loss is a bi-encoder's: the cross-encoder takes its own
        base = {k: v for k, v in base.items() if k != "loss"}
    loss = _checked("loss", given.get("loss", base.get("loss", CROSS_ENCODER_LOSS if model == CROSS_ENCODER
                                                          else "triplet")))
    if (model == CROSS_ENCODER) != (loss == CROSS_ENCODER_LOSS):
        raise SpecError("loss", f"{loss} does not apply to the cross-encoder: it reads both questions together and "
                                "trains with binary cross-entropy (bce) on every labelled pair, both labels; the "
                                "losses on vectors are the bi-encoders'" if model == CROSS_ENCODER else
                        f"bce is the cross-encoder's: the {model} model makes vectors; pick a loss on them")
    if base.get("model", model) != model:
        base = {k: v for k, v in base.items() if k not in _PER_MODEL}
    if base.get("loss", loss) != loss:
        base = {k: v for k, v in base.items() if k not in _PER_LOSS}
    merged = {**TRAINING_DEFAULTS[model], **base, **given, "model": model, "loss": loss}
    merged["model_options"] = {**size_defaults(model), **base.get("model_options", {}),
                               **_checked("model_options", given.get("model_options", {}))}
    values = {name: _checked(name, value) for name, value in merged.items() if name != "model_options"}
    values["model_options"] = _checked_model_options(model, merged["model_options"])
    _check_model_size(model, values)
    source = values.get("init_model")
    if source:  # a saved model folder of this family; ZERO_SHOT is MiniLM's usual start anyway
        family = init_model_family(source)
        if family != model:
            raise SpecError("init_model", f"{source} is a {family} model, but the run's model is {model}")
        values["init_model"] = "" if source == ZERO_SHOT else source
    if values.get("base_model"):
        values["base_model"] = _checked_base_model(values["base_model"], model, given.get("init_model", ""))
    if values.get("val_fraction", 0.0) + values.get("test_fraction", 0.0) > 0.5:
        raise SpecError("test_fraction", "plus val_fraction must leave at least half of the pairs to train on")

    loss_config = LossConfig(**{field_name: values[name] for name, field_name in _LOSS_FIELDS.items() if name in values})
    if loss != "contrastive":
        # A form means nothing to the other losses (multitask keeps the squared hinge): one spelling per run.
        loss_config.form = LossConfig().form
    if loss in ("softmax", "cosent"):
        loss_config.margin = DEFAULT_MARGINS[loss]
    if loss != "multitask":
        loss_config.weight = LossConfig().weight
    if loss == CROSS_ENCODER_LOSS:  # none of the settings means anything to it
        loss_config = LossConfig(name=loss)
    train = TrainConfig(**{name: value for name, value in values.items() if name in _TRAIN_FIELDS})
    run = {name: value for name, value in values.items() if name in _RUN_FIELDS}
    # labelled (and mined) non-duplicates only become extra negatives in batches of duplicates
    in_batch = loss_config.batch_kind == "duplicates"
    run["mine_negatives"] = run.get("mine_negatives", False) and in_batch
    run["hard_negatives"] = (run.get("hard_negatives", False) or run["mine_negatives"]) and in_batch
    return RunSpec(loss=loss_config, train=train, **run)
