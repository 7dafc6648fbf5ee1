"""Settings from the environment (prefix ``PROCTOR_``) via pydantic-settings."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_data_dir() -> Path:
    """Where the embedded default keeps its SQLite file: ``$XDG_DATA_HOME/proctor``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "proctor"


class Settings(BaseSettings):
    """Every ``PROCTOR_`` variable. See README "Configuration"."""

    model_config = SettingsConfigDict(env_prefix="PROCTOR_", env_file=".env", extra="ignore")

    data_dir: Path = Field(default_factory=default_data_dir)
    """Directory of the embedded SQLite database (``PROCTOR_DATA_DIR``)."""
    database_url: str = ""
    """SQLAlchemy async URL, e.g. ``postgresql+asyncpg://user:pw@host/db``;
    empty means the embedded default ``sqlite+aiosqlite:///<data_dir>/proctor.db``."""
    redis_url: str | None = None
    """``redis://host:port/db``; unset means in-process stand-ins (embedded default)."""

    @property
    def effective_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{self.data_dir / 'proctor.db'}"

    @property
    def is_embedded(self) -> bool:
        return self.effective_database_url.startswith("sqlite")


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings, read once."""
    return Settings()
