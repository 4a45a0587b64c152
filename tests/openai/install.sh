#!/usr/bin/env bash
# Installs the pinned openai client, Vercel AI SDK and LangChain JS (package.json, package-lock.json)
# into tests/openai/node_modules with `npm ci`. Once installed, later runs find
# the stamp matching package-lock.json and touch neither npm nor the network.
# Called by tests/run_all.sh (so by `make test`); tests/e2e_http_test.cc uses it.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v npm >/dev/null; then
  echo "tests/openai/install.sh: npm is missing (make deps installs nodejs and npm)" >&2
  exit 1
fi
stamp=node_modules/.sluice-package-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
npm ci --prefer-offline --no-audit --no-fund --loglevel=error
echo "$want" >"$stamp"
