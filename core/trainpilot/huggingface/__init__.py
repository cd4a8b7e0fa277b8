"""TrainPilot for a Hugging Face Trainer (the optional extra: `pip install "train-pilot[huggingface]"`).

    from trainpilot.huggingface import TrainPilotCallback, choose

    args = TrainingArguments(
        output_dir="out",
        num_train_epochs=3,
        per_device_train_batch_size=64,
        **choose(model, train_dataset, epochs=3, batch_size=64),  # use_cpu, loader workers, bf16/fp16, compile
    )
    trainer = Trainer(model=model, args=args, train_dataset=train_dataset, callbacks=[TrainPilotCallback()])
    trainer.train()  # timed, recorded in TrainPilot's history, the trace in trainer.state.log_history

`choose` profiles one real batch (collated by the Trainer's collator) through the model's own loss
and predicts every plan, as `trainpilot.plan` does, and returns the TrainingArguments fields of the
best plan a Trainer can run; told no batch size (`batch_size=` or `args=`), it plans at the
arguments' default of 8 and says so. `TrainPilotCallback` writes the training to the history
`trainpilot headless history` lists, predicted for the batch, steps, precision and device the Trainer
really runs (it profiles the Trainer's batch again where `choose` planned another); without `choose`
it plans the model itself when training starts. Importing
this module does not import transformers; using it without transformers raises ImportError with the
install command. See docs/huggingface.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainpilot.huggingface.choice import Choice, choose, last_choice
from trainpilot.huggingface.mapping import DECIDED, training_arguments
from trainpilot.huggingface.requirement import INSTALL_HINT

if TYPE_CHECKING:  # built on transformers' TrainerCallback when first used (callback.callback_class)
    from trainpilot.huggingface.callback import CallbackHooks as TrainPilotCallback


def __getattr__(name: str) -> Any:
    if name == "TrainPilotCallback":
        from trainpilot.huggingface.callback import callback_class

        return callback_class()
    raise AttributeError(f"module 'trainpilot.huggingface' has no attribute {name!r}")


__all__ = ["DECIDED", "INSTALL_HINT", "Choice", "TrainPilotCallback", "choose", "last_choice", "training_arguments"]
