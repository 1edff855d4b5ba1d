# Sourced by the device checks (gpu_study.sh, gpu_alone.sh): on the lent GPU machine, whose image lacks
# snakemake and spaCy, install the carried .device-wheels (../shared/device/wheelhouse.sh, then
# device/pack_spacy.sh and, for bench/fairseq_compare.py, device/pack_fairseq.sh) into /tmp/site and
# put it and a `nmtrepro` launcher first; elsewhere nothing.
# A later call on the same warm machine finds /tmp/site installed and uses it as it is, carried wheels or
# not: a study started by an earlier call (device/gpu_study.sh) may still be importing from it.
if [ -x /tmp/site/bin/nmtrepro ] || { [ -d .device-wheels ] && ! python3 -c "import snakemake" 2> /dev/null; }; then
    if [ ! -x /tmp/site/bin/nmtrepro ]; then
        python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .device-wheels/*.whl || exit 1
        tar -C /tmp/site -xJf .device-wheels/spacy-cp312.tar.xz || exit 1
        if [ -f .device-wheels/fairseq-cp312.tar.xz ]; then tar -C /tmp/site -xJf .device-wheels/fairseq-cp312.tar.xz || exit 1; fi
        mkdir -p /tmp/site/bin
        printf '#!/bin/sh\nexec python3 -m nmtrepro.cli "$@"\n' > /tmp/site/bin/nmtrepro && chmod +x /tmp/site/bin/nmtrepro
    fi
    export PYTHONPATH=/tmp/site:$PWD/src PATH=/tmp/site/bin:$PATH
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2> /dev/null || echo "no GPU"
python3 -c "import torch, spacy; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'spacy', spacy.__version__)"
