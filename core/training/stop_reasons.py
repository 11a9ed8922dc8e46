"""Why a run stopped, in the words the CLI and the pages show: pure functions of the trainer's counters and settings."""
from __future__ import annotations


def cancel_message(step: int, total_steps: int, epoch: int, best_epoch: int, best_step: int,
                   per_epoch_validation: bool, during_validation: bool) -> str:
    """"cancelled at step 40 of 120; the best model so far (epoch 1) is kept", or that it had none yet."""
    where = f"cancelled at step {step:,} of {total_steps:,}"
    if not best_epoch:
        return f"{where}, {'during' if during_validation else 'before'} the first validation"
    if per_epoch_validation:
        if during_validation:
            where += f" while scoring the validation of epoch {epoch}"
        return f"{where}; the best model so far (epoch {best_epoch}) is kept"
    if during_validation:
        where += " while scoring a validation"
    return f"{where}; the best model so far (step {best_step:,}, epoch {best_epoch}) is kept"


def early_stop_message(step: int, epoch: int, patience: int, per_epoch_validation: bool) -> str:
    if per_epoch_validation:
        return f"stopped after epoch {epoch}: validation ROC AUC did not improve for {patience} epoch(s)"
    return (f"stopped at step {step:,} (epoch {epoch}): validation ROC AUC did not improve for "
            f"{patience} validation(s)")


def planned_end_message(total_steps: int, planned_steps: int, max_steps: int, epochs: int) -> str:
    return (f"stopped at the step cap of {max_steps:,} steps" if total_steps < planned_steps
            else f"all {epochs} epoch(s) trained")


def budget_message(max_minutes: float, step: int, total_steps: int) -> str:
    return f"stopped by the time budget of {max_minutes:g} min at step {step:,} of {total_steps:,}"


def out_of_memory_message(error: BaseException) -> str:
    return f"out of memory ({str(error).splitlines()[0]}); try a smaller batch size or a shorter max length"


def non_finite_loss_message(value: float, step: int, lr: float) -> str:
    return f"the loss became {value} at step {step}; try a lower learning rate (now {lr:g})"


def no_batch_message(batch_kind: str) -> str:
    return (f"no training batch can be formed: the {batch_kind} batches need at least 2 suitable pairs "
            "(duplicate pairs for triplet/softmax)")
