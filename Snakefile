# nmtrepro: reproduce four NMT papers on source-side structure, from data to report.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/prepare.smk"
include: "workflow/rules/annotations.smk"
include: "workflow/rules/training.smk"
include: "workflow/rules/evaluation.smk"
include: "workflow/rules/analyses.smk"
include: "workflow/rules/reporting.smk"


# Jobs on this machine start as forks of one process that has imported torch (src/nmtrepro/forks/server.py).
onstart:
    forkserver.start(results("logs/forkserver.log"), local=workflow.local_exec and not workflow.touch)


onsuccess:
    forkserver.stop()


onerror:
    forkserver.stop()


rule all:
    default_target: True
    input:
        default_outputs(),
