"""Every table of every package, imported in one place for Alembic and tests."""

from bank import models as bank_models
from bank.database import Base
from server.audit import models as audit_models
from server.auth import models as auth_models
from server.calibration import models as calibration_models
from server.leaderboard import models as leaderboard_models
from server.ledger import models as ledger_models
from server.model_endpoints import models as endpoint_models
from server.orgs import models as org_models
from server.registry import models as registry_models
from server.review import models as review_models
from server.runs import models as run_models
from server.scoring import models as scoring_models
from server.sessions import models as session_models

metadata = Base.metadata

__all__ = [
    "audit_models",
    "auth_models",
    "bank_models",
    "calibration_models",
    "endpoint_models",
    "leaderboard_models",
    "ledger_models",
    "metadata",
    "org_models",
    "registry_models",
    "review_models",
    "run_models",
    "scoring_models",
    "session_models",
]
