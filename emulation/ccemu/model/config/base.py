"""What every section of an experiment config shares."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

# A host's name as configs write it: h1, h2, ... (no leading zero).
HOST_NAME = r"^h[1-9][0-9]*$"


class Section(BaseModel):
    """A config section: unknown keys are an error (a typo never passes silently), and a
    validated section never changes."""

    model_config = ConfigDict(extra="forbid", frozen=True)
