#!/usr/bin/env bash
# postgres18.sh WORKDIR : the PostgreSQL 18 stand-in, shaped like
# postgres:18 (see postgres.sh).
# sandboxer-inputs: postgres.sh
SANDBOXER_PG_MAJOR=18 exec "$(dirname "${BASH_SOURCE[0]}")/postgres.sh" "$@"
