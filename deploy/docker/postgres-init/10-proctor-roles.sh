#!/bin/sh
# First start of the compose PostgreSQL only: the two roles of deploy/README.md ("Database
# roles") and the database, owned by proctor_owner. Neither role is a superuser, and
# proctor_app is not a member of proctor_owner.
set -eu
psql -v ON_ERROR_STOP=1 --username "${POSTGRES_USER:-postgres}" --dbname postgres \
    -v owner_password="$PROCTOR_OWNER_DB_PASSWORD" \
    -v app_password="$PROCTOR_APP_DB_PASSWORD" <<'SQL'
CREATE ROLE proctor_owner LOGIN PASSWORD :'owner_password';
CREATE ROLE proctor_app LOGIN PASSWORD :'app_password';
CREATE DATABASE proctor OWNER proctor_owner;
SQL
