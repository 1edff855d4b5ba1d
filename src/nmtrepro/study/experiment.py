"""An experiment resolved at a scale: the record that the rules, the plan and the config's checks read.

`nmtrepro.study.config.experiments` makes one of each configured experiment (and of each of its seeds); its
fields name the functions there that set them. The record is data: it imports no config, so the checks
of the config (`nmtrepro.study.config_checks`) can read it too.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..data.annotations import annotation
from ..training.settings import AUTO_START as AUTO_MAX_TOKENS
from .meta_models import extra_inputs


@dataclass(frozen=True)
class Experiment:
    name: str
    dataset: str            # dataset registry key
    src_lang: str
    tgt_lang: str
    test: str               # test split decoded and scored
    variant: str            # key of `models`
    model: dict             # model spec: family + options, sizes resolved for the scale
    train: dict             # training settings at the scale, with the model size's regime
    average: dict           # checkpoint averaging, likewise
    resources: dict         # what its training job asks of the executor, likewise
    decode: dict            # decoding at the scale, with the experiment's own options over it
    init: str | None = None  # the experiment whose averaged model this one starts from (`init_from`)
    same_as: str | None = None  # an earlier experiment with the very same training (`_shared_trainings`)
    seed: int = 1           # its training's seed (`_seeded`: one experiment a seed of `seeds`)
    replicate_of: str = ""  # the configured experiment it is a seed replicate of (itself for the first seed)
    priority: int = 0       # its model size's scheduling priority at the scale (`by_size.<size>.priority`)
    stops_at: int | None = None  # a shorter budget of `same_as`'s training: its window ending here (budgets.py)

    @property
    def annotations(self) -> dict[str, str]:
        """The source annotations the model reads beside the source, name -> the stage making them per
        dataset part, as results/<scale>/<stage>/<dataset>/<part>.<name> (+ <part>.stats.json): those its
        family's config declares in `extra_inputs` (data.annotations); {} for a model reading the tokens alone."""
        return {name: annotation(name).stage for name in extra_inputs(self.model)}

    @property
    def tokens_per_batch(self) -> int:
        """Its training's batch in tokens (`batch_tokens`), for readers that get the record but may not
        import this module (the report stage's protocol note)."""
        return batch_tokens(self.train)


def batch_tokens(train: dict) -> int:
    """A training's `max_tokens` as a number: `auto`'s smallest size where it is auto (a batch of at
    least that, at most half an update: training.memory)."""
    return AUTO_MAX_TOKENS if train["max_tokens"] == "auto" else train["max_tokens"]
