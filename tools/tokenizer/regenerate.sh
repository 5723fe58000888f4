#!/bin/bash
# Regenerates every file in shared/tokenizer/testdata/ (see README.md).
# Needs the npm registry once; the C++ tests themselves run offline.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "${here}/../.." && pwd)
out="${root}/shared/tokenizer/testdata"
partial="${root}/tests/fixtures/k3/real-tokenizer-partial.json"
# Scratch npm project outside the repository.
npm_dir="${NPM_DIR:-/tmp/flotilla-tiktoken}"

mkdir -p "${npm_dir}" "${out}"
if [[ ! -f "${npm_dir}/node_modules/tiktoken/package.json" ]]; then
  (cd "${npm_dir}" && npm init -y >/dev/null && npm install tiktoken@1.0.22)
fi

# Debian's interpreter: Python 3.11 (unicodedata = Unicode 14) with the
# python3-regex package (V1 flag, && intersection).
/usr/bin/python3 "${here}/gen_corpus.py" "${out}/corpus.json"
/usr/bin/python3 "${here}/gen_kimi_splits.py" "${partial}" \
  "${out}/corpus.json" "${out}"
node "${here}/gen_tiktoken_golden.cjs" "${npm_dir}/node_modules" "${partial}" \
  "${out}/corpus.json" "${out}"
ls -l "${out}"
