"""Three-stage stratified sampling: ``plan`` (quotas), ``draw`` (selection), ``service`` (DB)."""
