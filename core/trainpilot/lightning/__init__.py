"""TrainPilot for a Lightning Trainer (the optional extra: `pip install "train-pilot[lightning]"`).

    from trainpilot.lightning import TrainPilotCallback, choose, last_choice

    trainer = lightning.Trainer(
        **choose(module, datamodule, epochs=3),  # accelerator, devices; torch threads set for a CPU plan
        max_epochs=3,
        callbacks=[TrainPilotCallback()],  # times the fit, records it, logs the agent's trace
    )
    trainer.fit(module, datamodule)

`choose` profiles the module's own training_step on one real batch and predicts every plan, as
`trainpilot.plan` does, and returns the Trainer arguments of the best plan a Trainer can run
(eager CPU, one CUDA device, MPS). Lightning's dataloaders are yours to build: the plan's DataLoader
worker count is `last_choice(module).loader_workers`. `TrainPilotCallback` writes the fit to the
history `trainpilot headless history` lists; without `choose` it plans the module itself when
training starts. Importing this module does not import Lightning; using it without Lightning raises
ImportError with the install command. See docs/lightning.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainpilot.lightning.choice import Choice, choose, last_choice
from trainpilot.lightning.mapping import trainer_arguments
from trainpilot.lightning.requirement import INSTALL_HINT

if TYPE_CHECKING:  # built on Lightning's Callback when first used (callback.callback_class)
    from trainpilot.lightning.callback import CallbackHooks as TrainPilotCallback


def __getattr__(name: str) -> Any:
    if name == "TrainPilotCallback":
        from trainpilot.lightning.callback import callback_class

        return callback_class()
    raise AttributeError(f"module 'trainpilot.lightning' has no attribute {name!r}")


__all__ = ["INSTALL_HINT", "Choice", "TrainPilotCallback", "choose", "last_choice", "trainer_arguments"]
