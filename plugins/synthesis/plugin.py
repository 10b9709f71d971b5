"""Entry-point module: VeriGen's task-synthesizer roles and its loop (a kind of its own).

Config slots (``synthesis.<role>``; ``null`` removes a role, the paper's ablation):

* ``proposer``:  ``llm-proposer`` (knowledge documents + live desktop),
  ``trajectory-proposer`` (trajectory-guided: decompose failed, compose solved tasks),
  ``template-proposer`` (the parametric task families, no LLM)
* ``validator``: ``rule-validator`` (static rules of :mod:`plugins.judges.validator`)
* ``judger``:    ``llm-judger``
* ``checker``:   ``llm-checker`` (an LLM's dry run), ``oracle-checker`` (the task's own oracle and near misses)
* ``fixer``:     ``llm-fixer``
* ``pipeline``:  ``verigen`` (the loop: workers, desktops, repairs, task store)
"""

from core import hookimpl


@hookimpl
def scalecua_register_synthesizer_roles(registry):
    registry.register("llm-proposer", "plugins.synthesis.proposer:LLMProposer",
                      options="plugins.synthesis.proposer:ProposerOptions",
                      description="proposer: tasks from knowledge documents and a live desktop")
    registry.register("trajectory-proposer", "plugins.synthesis.trajectory:TrajectoryProposer",
                      options="plugins.synthesis.trajectory:TrajectoryProposerOptions",
                      description="proposer: easier sub-tasks of failed tasks, harder compositions of solved ones")
    registry.register("template-proposer", "plugins.synthesis.template_proposer:TemplateProposer",
                      options="plugins.synthesis.template_proposer:TemplateProposerOptions",
                      description="proposer: variants of the parametric task families (train/validation/test)")
    registry.register("oracle-checker", "plugins.synthesis.oracle_checker:OracleChecker",
                      options="plugins.synthesis.oracle_checker:OracleCheckerOptions",
                      description="checker: untouched state 0, the task's oracle 1, its near misses 0, on a desktop")
    registry.register("rule-validator", "plugins.synthesis.validator:RuleValidator",
                      options="plugins.synthesis.validator:RuleValidatorOptions",
                      description="validator: static rules over task and judge code")
    registry.register("llm-judger", "plugins.synthesis.review:LLMJudger",
                      options="plugins.synthesis.review:JudgerOptions",
                      description="judger: static semantic review by an LLM")
    registry.register("llm-checker", "plugins.synthesis.checker:LLMChecker",
                      options="plugins.synthesis.checker:CheckerOptions",
                      description="checker: dry run on a live desktop, judge on start and reached states")
    registry.register("llm-fixer", "plugins.synthesis.review:LLMFixer",
                      options="plugins.synthesis.review:FixerOptions",
                      description="fixer: repairs candidates from all findings")


@hookimpl
def scalecua_register_synthesis_pipelines(registry):
    registry.register("verigen", "plugins.synthesis.pipeline:VeriGenPipeline",
                      options="plugins.synthesis.pipeline:PipelineOptions",
                      description="the VeriGen loop: N workers, M desktops, repairs, SQLite task store")
