"""The override dialog: every plan the agent considered with its predicted time; plans that cannot
run here are listed but disabled, with the reason. Picking one returns (backend, threads, mode,
memory_format, precision), the settings spelt out ("contiguous", "fp32" for PyTorch's defaults) so
the run moves to exactly the plan picked."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from trainpilot.agent.plan_summary import split_lift
from trainpilot.plans import Plan

from .. import format as fmt
from ..plan_book import PlanOption

Choice = tuple[str, "int | None", "str | None", str, str]


def choice_for(plan: Plan) -> Choice:
    """What picking `plan` asks the session for: its settings explicit, not None ("whichever is
    predicted fastest"), so a contiguous fp32 plan is not swapped for its channels_last twin."""
    return (plan.backend, plan.threads, plan.mode, plan.memory_format or "contiguous", plan.precision or "fp32")


def option_prompt(option: PlanOption, current: Plan | None, key: str | None, width: int) -> Content:
    label = option.plan.short_label
    key_hint = (f"[{key}] " if key else "    ", "$text-muted")
    if not option.available:  # the reason on one line; the Agent panel names what lifts it
        reason, _lift = split_lift(option.excluded_reason or "")
        return Content.assemble(key_hint, f"{label:<{width}}  ", (f"n/a: {reason}", "$text-muted"))
    predicted = f"predicted {fmt.seconds_range(option.predicted_s, option.low_s, option.high_s)} for the whole run" if option.predicted_s is not None else "no estimate yet"
    here = ("  (current)", "bold") if current == option.plan else ("", "")
    return Content.assemble(key_hint, (f"{label:<{width}}  ", "bold"), predicted, here)


class BackendChooser(ModalScreen[Choice | None]):
    CSS_PATH = "backend_chooser.tcss"
    BINDINGS = [Binding("escape", "dismiss_none", "Cancel")]

    def __init__(self, options: list[PlanOption], current: Plan | None, keys: dict[str, str]) -> None:
        super().__init__()
        self.options = options
        self.current = current
        self.keys = keys  # backend -> its direct override key, shown as a hint

    def compose(self) -> ComposeResult:
        width = max((len(o.plan.short_label) for o in self.options), default=8)
        seen: set[str] = set()
        items = []
        for index, option in enumerate(self.options):
            key = self.keys.get(option.plan.backend) if option.plan.backend not in seen else None
            seen.add(option.plan.backend)
            items.append(Option(option_prompt(option, self.current, key, width), id=str(index), disabled=not option.available))
        with Vertical(id="dialog"):
            yield Label("Move the run to another plan", id="title")
            yield Label("It moves at the next step boundary and keeps its weights and optimizer state.", id="subtitle")
            yield OptionList(*items, id="plans")
            yield Label("enter: move · esc: cancel", id="hint")

    def on_mount(self) -> None:
        plans = self.query_one(OptionList)
        plans.focus()
        current = next((i for i, o in enumerate(self.options) if o.plan == self.current), None)
        if current is not None:
            plans.highlighted = current  # start on the plan in use: one key away from its neighbours

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        option = self.options[int(event.option.id or 0)]
        self.dismiss(choice_for(option.plan))

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
