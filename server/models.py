"""Every table of every package, imported in one place for Alembic and tests."""

from bank import models as bank_models
from bank.database import Base
from server.orgs import models as org_models

metadata = Base.metadata

__all__ = ["bank_models", "metadata", "org_models"]
