#!/usr/bin/env bash
# fairseq for the lent GPU machine (issue 38: bench/fairseq_compare.py --setup paper, ours beside fairseq on
# one GPU): the fairseq-fixed 0.12.3.1 wheel for CPython 3.12 and what it needs that the image lacks
# (hydra-core, omegaconf, antlr4 4.9, bitarray, cffi), unpacked, shared libraries stripped and fairseq's
# example data (images, audio, notebooks) left out: 54 MB -> 11 MB -> one .tar.xz of about 1 MB beside
# ../shared/device/wheelhouse.sh's wheels. torchaudio, which fairseq declares, is on the image; its
# translation code never imports it.
# Usage, from the project's root:   device/pack_fairseq.sh [DIR]   (default .device-wheels)
# device/env.sh unpacks it into /tmp/site there.
set -euo pipefail
DIR=${1:-.device-wheels}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
plat=(--python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64 --platform any)
for pkg in fairseq-fixed==0.12.3.1 hydra-core==1.3.2 omegaconf==2.3.0 bitarray==3.12.3 cffi==2.1.1 pycparser==3.12; do
  pip download -q --no-deps --only-binary=:all: "${plat[@]}" -d "$work/wheels" "$pkg"
done
pip wheel -q --no-deps -w "$work/wheels" antlr4-python3-runtime==4.9.3  # hydra-core's pin; published as source only
mkdir -p "$work/site" "$DIR"
for wheel in "$work"/wheels/*.whl; do unzip -q -o "$wheel" -d "$work/site"; done
find "$work/site" -name '*.so' -exec strip --strip-unneeded {} +
find "$work/site/fairseq/examples" -type f ! -name '*.py' -delete
tar -C "$work/site" -cf - . | xz -T2 -6 > "$DIR/fairseq-cp312.tar.xz"
echo "$(du -h "$DIR/fairseq-cp312.tar.xz" | cut -f1) in $DIR/fairseq-cp312.tar.xz"
