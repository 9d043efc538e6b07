#!/bin/sh
# Builds the VS Code extension: policyc-<version>.vsix in this folder (or at the path given as
# the first argument). Install it with `code --install-extension policyc-<version>.vsix`.
set -eu
cd "$(dirname "$0")"
if ! command -v npm >/dev/null 2>&1; then
  echo "package.sh: npm is needed to build the extension (install Node.js 20 or later)" >&2
  exit 2
fi
# the locked dependencies, installed once (again when package-lock.json changes)
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi
version=$(node -p "require('./package.json').version")
out=${1:-policyc-$version.vsix}
npx --no-install vsce package --allow-missing-repository --out "$out"
echo "package.sh: built $out"
