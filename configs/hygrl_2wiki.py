"""HyGRL in its own setting: multi-entity multi-hop retrieval over the
heterogeneous passage graph of HippoRAG's 2WikiMultiHopQA set (6,119
passages; 804 questions, a fixed quarter of them dev). The paper's
hyperparameters are the defaults:

* the policy σ(MLP([S ‖ A])) with hidden sizes [512, 256, 128] reads the
  (2L+1)-dim state-action vector of relevance scores (window L);
* imitation of the fused heuristic with BCE, AdamW 1e-3 and
  ReduceLROnPlateau; then SCST + MarginRanking (margin 1.0) with Adam
  5e-4; batch 256;
* the relevance scores m are cosines of all-MiniLM-L6-v2 vectors (a
  bi-encoder), the default because it runs at 20+ questions/s on 2 CPU
  cores. The MiniLM cross-encoder, fine-tuned on the training questions:
  ``multihop.relevance=cross_encoder_state`` is the paper's m_ce(Q ⊕ N_s,
  a) at every search state, inside the jitted search (N + L pairs per state
  and question: an accelerator's work; with ``multihop.node_pairs=
  cross_encoder`` the node-to-node entries m_ce(n_i, a) too, N + L + L·N);
  ``multihop.relevance=cross_encoder`` scores each subgraph node once per
  question, m_ce(Q ⊕ N_0, n), for the vector's question entries;
* mentor and judge: the configured LLM backend (``hygrl.mentor`` /
  ``hygrl.judge`` = ``auto``: ``--config.agents.backend=openai|gemini``
  with its model); with no backend (``local``) the offline oracles, the
  mentor's gold distance and the share of gold passages retrieved.

  python launch/train.py --config=configs/hygrl_2wiki.py \\
      --data_dir=DATA --workdir=runs/hygrl_2wiki
  python launch/evaluate.py --workdir=runs/hygrl_2wiki --data_dir=DATA
"""


from configs import default


def get_config():
  config = default.get_config()
  config.method = "hygrl_multihop"
  config.text.encoder = "minilm"
  h = config.hygrl
  h.hidden_sizes = (512, 256, 128)
  # the (2L+1)-dim vector. On 2Wiki dev "embedding" (node vectors and the
  # four metrics, the CSQA input) measured better: Recall@5 0.949 (seed 0)
  # against 0.908-0.928 (seeds 0-2), both at the heuristic's node budget
  h.policy_features = "scores"
  h.reward = "gold_recall"            # offline judge: share of gold found
  # the paper's LLM mentor and judge whenever agents.backend names one;
  # "offline" / "llm" force either
  h.mentor = "auto"
  h.judge = "auto"
  h.policy_choice = False             # no answer choices here
  h.heuristic_choice = False
  h.beam_width = 4                    # k
  h.window = 4                        # L
  h.max_depth = 3                     # D_max
  h.max_nodes = 12                    # nodes the search may add
  h.tau = 0.5
  h.heuristic_tau = 0.3
  h.calibration_questions = 256
  h.imitation_steps = 150
  h.rl_steps = 150
  # Adamic-Adar and Jaccard against v_cur, as the paper writes: on 2Wiki dev
  # (2 seeds each, 7 Dec 2026) policy Recall@5 0.910 against 0.915 for the
  # best link to the sequence (-0.004 [-0.016, +0.006], p = 0.57)
  h.pair_anchor = "current"
  h.learning_rate = 1e-3              # imitation: AdamW
  h.rl_learning_rate = 5e-4           # RL: Adam
  h.plateau_factor = 0.5              # ReduceLROnPlateau
  h.plateau_patience = 5              # epochs without improvement
  config.batch.batch_size = 256
  config.eval.batch_size = 64
  config.train.log_every = 25
  config.train.checkpoint_every = 100
  return config


def sample_config(dataset: str):
  """The same run on a 100-question sample with its own corpus (HotpotQA,
  MuSiQue; exact gold): about 80 training questions, so batches of 64
  (256 would be three quarters padding) and fewer updates."""
  config = get_config()
  config.multihop.dataset = dataset
  config.hygrl.calibration_questions = 80
  config.batch.batch_size = 64
  config.hygrl.imitation_steps = 100
  config.hygrl.rl_steps = 100
  return config
