"""Every text the Learn page shows, in English and in Chinese (the seed's language), from one place.

`TEXT[lang][key]` is a string, sometimes with `{placeholders}` the page fills with live numbers.
The Chinese follows the seed text's own terms: 时间步, 隐藏状态, 参数共享, 编码器, 解码器,
上下文向量, 自回归生成, 信息瓶颈, 注意力, 查询/键/值 (Query/Key/Value).
Both languages have exactly the same keys (a test checks it).
"""

from __future__ import annotations

LANGUAGES = {"en": "English", "zh": "中文"}

TEXT: dict[str, dict] = {
    "en": {
        "title": 'Learn: attention from first principles',
        "tour_prev": 'Previous',
        "tour_next": 'Next',
        "tour_first": 'First section',
        "tour_last": 'Last section',
        "tour_where": 'Section {k} of {n}',
        "language": 'Language',
        "intro": (
            'The article argues in six steps, each forced by the one before: sequences are values over '
            '**time steps**; an **RNN unit** reads them one step at a time with a memory; its weights '
            'must be **shared** across steps; two RNNs make an **encoder–decoder**; its single context '
            'vector is an **information bottleneck**; and **attention** removes the bottleneck by looking '
            'back at every encoder state through Query, Key and Value. A seventh section asks what the article '
            'leaves open: whether the attention weights explain the output. Every widget below runs a real '
            'model, and every number is the one the model computed.'),
        "model": 'Model',
        "input": 'Input',
        "time_step": 'Time step t',
        "output_step": 'Output step t',
        "bad_model": 'This model cannot be shown here: {error}',
        "training_lessons": 'Training two tiny RNNs for this lesson (once per server, about 10 s)…',
        "no_models": (
            'No model available for this widget yet: ship checkpoints in pretrained/ or train one on '
            'the Train page.'),
        "s1": '1. Sequences as time steps',
        "s1_text": (
            'Order matters: “I love you” and “you love I” are different sequences. The article models order '
            'with **time**: cut the interval $[0, T]$ into $N$ equal time slices; the index of a slice '
            'is a **time step** $t_i$, and the value observed in it is one **sample** $A_i$. Holding '
            'each sample over its slice gives a step function; as $N$ grows, the largest gap between '
            'it and the true $f(t)$ shrinks to zero, so a sequence of samples can describe a continuous '
            'signal as closely as we like.'),
        "s1_signal": 'Signal f(t)',
        "signal_price": 'a price over a day',
        "signal_wave": 'a sine wave',
        "signal_chirp": 'a chirp (speeding up)',
        "s1_n": 'Number of time steps N',
        "s1_numbers": (
            'With **N = {n}** time steps (Δt = {dt:.4f}) the largest error is **{err:.4f}** (at t = {worst:.3f}); '
            'with 2N = {n2} it is **{err2:.4f}**, about {ratio:.2f}× smaller.'),
        "s1_f": 'f(t)',
        "s1_steps": 'sampled sequence A<sub>i</sub>',
        "s1_worst": 'largest error',
        "s1_time": 'time t',
        "s1_error_x": 'time steps N',
        "s1_error_y": 'largest error max |f(t) − A<sub>i</sub>|',
        "s1_tokens": (
            'A text is already sampled: the input **{text}** is the sequence $x_1 \\dots x_{{{m}}}$ of '
            '{m} time steps, one symbol each, and each symbol becomes a vector $x_t$ (its embedding).'),
        "s2": '2. The RNN unit: a network with memory',
        "s2_text": (
            'Read like a person reads: take the symbol at step $t$, understand it, and merge it with '
            'what was understood up to step $t-1$. The unit is a function $f_\\theta: (x_t, h_{t-1}) \\mapsto '
            'h_t$, where the **hidden state** $h_t$ is the understanding so far. The simplest merge is '
            'a linear combination of $h_{t-1}$ and $x_t$ (like mixing paints on a palette), followed '
            'by a nonlinearity $\\sigma$ for expressive power.'),
        "s2_gru_text": (
            'This model uses a **GRU** unit: the same idea, with two gates that decide how much of $h_{t-1}$ '
            'to reset ($r$) and how much to keep ($z$). The numbers below are its gates, computed by '
            "hand from the model's weights."),
        "s2_rows_rnn": [
            'h<sub>t−1</sub>',
            'x<sub>t</sub>',
            'W[h<sub>t−1</sub>; x<sub>t</sub>] + b',
            'h<sub>t</sub> = tanh(·)',
        ],
        "s2_rows_gru": [
            'h<sub>t−1</sub>',
            'x<sub>t</sub>',
            'r<sub>t</sub> (reset)',
            'z<sub>t</sub> (keep)',
            'n<sub>t</sub> (candidate)',
            'h<sub>t</sub>',
        ],
        "s2_numbers": (
            'Step $t = {t}$ reads **{token}**. First component: ${input_eq}$, so ${state_eq}$.'),
        "s2_numbers_gru": (
            'Step $t = {t}$ reads **{token}**. First component: $r_1 = {r:.4f}$, $z_1 = {z:.4f}$, $n_1 '
            '= {n:.4f}$, so ${state_eq}$.'),
        "s2_check": (
            "Computed by hand (numpy, float64) from the weights, compared with PyTorch's own `{module}` "
            'module on the same input: the largest difference over all {m} steps is **{diff:.1e}**.'),
        "s2_shown": 'Showing the first {k} of {H} components.',
        "s2_weights": 'The weights W = [W_hh, W_ih] and b of this unit',
        "s2_component": 'component',
        "s3": '3. Parameter sharing',
        "s3_text": (
            'Chain units to form a layer. The first idea gives every time step its own weights $W_t, '
            'b_t$ — **the mistake**: the parameter count grows with the length, it needs more data and '
            'overfits, and a layer built for $m$ steps has no weights at all for step $m + 1$.'),
        "s3_fix": (
            'The fix, as in a CNN: **share** one $W$ and $b$ across all steps. The inductive bias is '
            'that the rules of a sequence are stationary — the same rule applies at every position.'),
        "s3_latex_unshared": r"\text{unshared: }",
        "s3_latex_unshared_count": r"\ \text{parameters}",
        "s3_latex_shared": r"\text{shared: }",
        "s3_latex_shared_count": r"\ \text{parameters, for any } m",
        "s5_latex": r"\quad\text{must carry } x_1,\dots,x_m \text{ for every } m",
        "s3_hidden": 'Hidden size H',
        "s3_embed": 'Input size E',
        "s3_length": 'Sequence length m',
        "s3_numbers": (
            'One layer with $E = {E}$, $H = {H}$ at length $m = {m}$: shared **{shared:,}** parameters '
            '($H(H+E) + H$, the same for every $m$), unshared **{unshared:,}** ($m$ times as many).'),
        "s3_shared": 'shared W (one for all steps)',
        "s3_unshared": 'unshared W_t (one per step)',
        "s3_x": 'sequence length m',
        "s3_y": 'parameters',
        "s3_real": (
            'Two real models, trained here on **copy** with inputs of length {lo}–{hi} only: one with '
            'a shared tanh RNN encoder, one with an unshared encoder $W_1 \\dots W_{{{hi}}}$. Try an input '
            'longer than {hi}.'),
        "s3_try": 'Input for both models',
        "s3_table_model": 'model',
        "s3_table_params": 'encoder parameters',
        "s3_table_output": 'output',
        "s3_table_correct": 'correct',
        "s3_shared_name": 'shared W',
        "s3_unshared_name": 'unshared W_t',
        "s3_failed": 'cannot run',
        "s3_unshared_error": 'The unshared model refuses this input: {error}.',
        "s3_unshared_missing": (
            'The unshared model cannot run: it has weights W_1 … W_{limit} for {limit} time steps only, '
            'and this input has {m} — there is no W_{next} for step {next}. (The engine says: “{error}”.)'),
        "s3_shared_ok": (
            'The shared model runs on any length (length {m} here): it has the one W it uses at every '
            'step. Whether it is right on a length it never saw is a question of training, not of having '
            'weights.'),
        "s3_counts": (
            'Real parameter counts of the two encoders: shared {shared:,}; unshared {unshared:,} = {hi} '
            "× {per:,}. (PyTorch's tanh RNN keeps two bias vectors, b_ih + b_hh = b, hence H more than "
            'H(H+E) + H.)'),
        "s4": '4. Encoder–decoder',
        "s4_text": (
            'The RNN that reads the input is the **encoder**: its final hidden state fuses everything '
            'it read into one **context vector**. A second RNN, the **decoder**, starts from that vector, '
            'is fed the start symbol <sos>, and emits one output symbol per step, feeding each output '
            'back as the next input: **autoregressive generation**, until it emits <eos>. The article\'s own '
            'example: “How can we use variable input lengths?” becomes “我们如何使用可变输入长度” — 7 words '
            'in, 12 characters out; pick `eng-cmn` or `eng-fra` above to run it through a real model.'),
        "s4_bi": (
            'This encoder reads in both directions, so its context is the forward state after the last '
            'symbol joined with the backward state after the first; a small layer maps them to $s_0$.'),
        "s4_attends": (
            'This model also attends (section 6); here we only follow its context vector and its decoding '
            'loop. The model without attention is the pure encoder–decoder.'),
        "s4_states": 'Encoder states h₁ … hₘ (the last one, the context vector, is outlined)',
        "s4_s0": 's₀: all the decoder knows about the input — {n} numbers',
        "s4_chain": "Decoding from <sos>: each step's input is the previous step's output",
        "s4_dist": 'Output distribution ŷₜ at each step (the chosen token outlined)',
        "s4_dist_x": 'output token',
        "s4_dist_y": 'step: fed y<sub>t−1</sub> →',
        "col_step": 't',
        "col_fed": 'fed yₜ₋₁',
        "col_chosen": 'output ŷₜ',
        "col_p": 'p(ŷₜ)',
        "col_truth": 'correct token',
        "col_top": 'top candidates',
        "s4_result": 'Output **{output}** — {verdict}',
        "correct": 'correct ✓',
        "wrong": 'wrong ✗ (the right answer is {truth})',
        "unknown_truth": 'no ground truth for this input',
        "s5": '5. The information bottleneck',
        "s5_text": (
            'The encoder–decoder handles variable lengths and order, but it squeezes the whole input '
            'into one fixed vector. The longer the input, the more the early symbols are diluted — long-range '
            'dependencies are lost. This is the **information bottleneck**. Below: reversal models with '
            'the same layer sizes (hidden {hidden}), trained on lengths {lo}–{hi}, one with attention and one '
            'without ({params} parameters: attention adds its query, key and value projections), scored on {samples} fresh inputs at each length (the same numbers as `python -m explorer '
            'eval`).'),
        "s5_none": 'The bottleneck curve needs two reversal models (with and without attention): ship or train them.',
        "s5_numbers": 'Exact match at length {lengths}:',
        "s5_x": 'input length (symbols)',
        "s5_y": 'exact match (%)',
        "s5_trained": 'trained on',
        "s5_cost": 'Computed once per server in {seconds:.1f} s, then shared by every visitor.',
        "s6": '6. Attention: Query, Key, Value',
        "s6_text": (
            'Instead of one context vector, let the decoder **look back** at every encoder state $h_i$ '
            'at every step. It must decide where to look and how to combine what it finds, under uncertainty '
            '— so the answer is probabilistic. At output step $t$:'),
        "s6_steps": (
            '1. **update the state** $s_t$ from the previous output and the previous context;\n2. form '
            'the **query** ${query_eq}$ — what the decoder is looking for; every encoder '
            'state has a **key** ${key_eq}$ — a summary of what it holds — and a **value** '
            '${value_eq}$ — what it hands over;\n3. **score** every key against the query, '
            'turn the scores into probabilities with softmax, and take the expected value: the context '
            '$c_t$;\n4. **predict** $\\hat y_t$ from the state and the context.'),
        "s6_db": (
            'Read it as a **probabilistic database lookup**: each encoder state is a record with a key '
            'and a value; the query is compared with every key; the answer is the probability-weighted '
            'value.'),
        "s6_step1": 'Step 1 — state: fed $y_{{t-1}}$ = **{fed}**; $s_t$ has {H} numbers, the first: {s}',
        "s6_step2": 'Step 2 — query: $q_t$ = {q} ({D} numbers)',
        "s6_step3": (
            'Step 3 — the record with the highest score is $i = {i}$ (“{token}”): $e_{{t{i}}} = {e:.3f}$, '
            'so ${weight_eq}$.'),
        "s6_step4": 'Step 4 — prediction: $\\hat y_t$ = **{chosen}** (p = {p:.4f}); next best: {others}',
        "s6_table": 'The lookup table at step t',
        "col_record": 'record i',
        "col_token": 'input xᵢ',
        "col_key": 'key kᵢ',
        "col_score": 'score eₜᵢ',
        "col_weight": 'weight αₜᵢ',
        "col_value": 'value vᵢ',
        "col_true": 'true position',
        "s6_context": 'Context ${context_eq}$ = {c}',
        "s6_check": (
            "Checks on the model's own numbers: max |c_t − Σ_i α_ti v_i| = {ctx:.1e}{score}; the weights "
            'sum to {total:.6f}.'),
        "s6_score_check": '; max |e_t − K q_t| = {e:.1e}',
        "s6_weights_y": 'weight α<sub>ti</sub>',
        "s6_weights_x": 'record i (input symbol)',
        "s6_truth": 'true position',
        "s6_heat_x": 'input position i',
        "s6_heat_y": 'output step t',
        "s6_explore": 'Open this step in Explore',
        "s6_needs_attention": 'This model has no attention; pick one that attends.',
        "s6_scaling": (
            '**What scaling changes.** The score $e = q\\cdot k$ is a sum of $D$ products (here $D$ = {D}), so '
            'its spread over the inputs grows like $\\sqrt{{D}}$ with the dimension, and a softmax of widely '
            'spread scores puts nearly all weight on one input, where its gradient almost vanishes. Scaled dot '
            'divides by $\\sqrt{{D}}$ = {sqrtD:g}. The shipped twins, trained alike on reversal, show what it does '
            'once trained: `{dot}` (dot): scores spread {dot_spread:.1f}, mean peak weight {dot_peak:.3f}; '
            '`{scaled}` (scaled dot): scores spread {scaled_spread:.1f}, but its $q\\cdot k$ before the division '
            'spread {scaled_raw:.1f}: training grew the vectors until the choice was as sharp as before (mean '
            'peak {scaled_peak:.3f}). Both learned the task (exact match {dot_exact:.0%} and {scaled_exact:.0%}); '
            'scaling matters most at the start of training, when it keeps the softmax out of saturation.'),
        "s6_scaling_more": ' `{name}` ({kind}): mean peak weight {peak}, exact match {exact:.0%}.',
        "s6_scaling_where": 'Measured on the same {n} fresh inputs; Compare shows the twins side by side.',
        "s7": '7. Is attention an explanation?',
        "s7_text": (
            'Attention shows **where** the model looked at each step. Is that **why** it chose its output? The '
            'weights are not built to answer that, and the question has a literature of its own (Jain & Wallace '
            '2019, *Attention is not Explanation*; Wiegreffe & Pinter 2019, *Attention is not not Explanation*; '
            'Serrano & Smith 2019). Two tests, on the live model:'),
        "s7_tests": (
            '1. **Ask the inputs another way.** Score each input $x_i$ for the chosen token $y_t$, with the same '
            'prefix: **gradient × input** (how fast the score of $y_t$, its logit, moves with $x_i$, times $x_i$), '
            '**integrated gradients** (the same, summed along a path from an average input, Sundararajan et al. '
            '2017) and **erasure** (how much $\\log p(y_t)$ drops when $x_i$ is hidden from attention at that '
            'step). If α explains the '
            'step, they should point where α points.\n2. **Change α and look again.** Replace ${alpha_t}$ by a '
            'shuffle of itself, by the uniform α, and by an adversarial α that goes as far from ${alpha_t}$ as '
            'it can while keeping the output almost the same; decode that one step again. If α explains the '
            'step, a very different α should change the output.'),
        "s7_alpha": 'attention α',
        "s7_gxi": 'gradient × input',
        "s7_ig": 'integrated gradients',
        "s7_erasure": 'erasure',
        "s7_heat_title": 'α and the attributions: rows are steps, columns inputs',
        "s7_computing": 'Explaining every step…',
        "s7_step": (
            'At step {t} the model chose **{chosen}**. Its largest weight α is on $x_{{{ia}}}$ “{ta}”; gradient × '
            'input points at $x_{{{ig}}}$ “{tg}”, integrated gradients at $x_{{{ii}}}$ “{ti}”{ig_note}, erasure '
            'at $x_{{{ie}}}$ “{te}”.'),
        "s7_ig_note": ' (not converged at this step: the path crossed a jump of the output)',
        "s7_sentence": (
            'Over this sentence ({steps} steps), the top input of gradient × input, integrated gradients and '
            'erasure is the one α picks at {g:.0%}, {i:.0%} and {e:.0%} of the steps (Kendall τ of the rankings: '
            '{tg:.2f}, {ti:.2f}, {te:.2f}; 1 is the same order).'),
        "s7_counter_title": 'At step {t}, α replaced and the step decoded again',
        "s7_counter_step": 'At step {t}: {perm}; {uni}; {adv}.',
        "s7_kept": '{kind} keeps **{tok}** (the output moves by TVD {tvd:.2f})',
        "s7_changed": '{kind} changes it to **{tok}** (TVD {tvd:.2f})',
        "s7_perm": 'α shuffled',
        "s7_uni": 'the uniform α',
        "s7_adv": 'an adversarial α {jsd:.2f} from α (JSD)',
        "s7_nothing": (
            '**A large change in α changed nothing here**: the step has other attentions that give the same '
            'output, so this α is one explanation of it among several.'),
        "s7_flips": (
            'Over the sentence the top token changed at {perm} of {steps} steps with α shuffled, {uni} with the '
            'uniform α and {adv} with the adversarial α (which kept every output within ε = {eps:g}).'),
        "s7_reading": (
            'Read the two tests together. Where the attributions agree with α and a different α changes the '
            'output, α is a faithful account of that step. Where another α gives the same output, α is one '
            'account among several: plausible, not proven. Try the reversal model against a translation model, '
            'and a long input against a short one.'),
        "s7_none": (
            'This model has no attention: its attributions are shown, and there is no α to compare them with or '
            'to replace.'),
        "s7_explore": 'Open this step in Explore, with its faithfulness section',
        "summary": (
            'From time steps to a unit with memory, from shared weights to an encoder–decoder, from its '
            'bottleneck to attention, and from attention to the question whether it explains: each step answered '
            'the problem the previous one left.'),
    },
    "zh": {
        "title": '学习：从第一性原理到注意力',
        "tour_prev": '上一节',
        "tour_next": '下一节',
        "tour_first": '第一节',
        "tour_last": '最后一节',
        "tour_where": '第 {k} 节，共 {n} 节',
        "language": '语言',
        "intro": (
            '原文分六步推进，每一步都由上一步的问题逼出来：把序列看作**时间步**上的取值；用带记忆的 '
            '**RNN 单元**逐个时间步地读；各时间步的参数必须**共享**；两个 RNN 组成**编码器-解码器**；'
            '它唯一的上下文向量是**信息瓶颈**；**注意力**通过查询（Query）、键（Key）、值（Value）回头查看编码器的每一个隐藏状态，'
            '从而打破瓶颈。第七节追问原文没有回答的问题：注意力权重能否解释模型的输出。'
            '下面每个小部件都运行一个真实的模型，显示的每个数字都是模型实际算出的数字。'),
        "model": '模型',
        "input": '输入',
        "time_step": '时间步 t',
        "output_step": '输出时间步 t',
        "bad_model": '无法在这里展示这个模型：{error}',
        "training_lessons": '正在为本节训练两个很小的 RNN（每台服务器只训练一次，约 10 秒）……',
        "no_models": '这个小部件暂时没有可用的模型：请在 pretrained/ 中放入检查点，或在“训练”页训练一个。',
        "s1": '1. 把序列看作时间步',
        "s1_text": (
            '顺序决定含义：“I love you”和“you love I”是不同的序列。原文借助**时间**为顺序建模：把区间 '
            '$[0, T]$ 切成 $N$ 个等长的时间片，时间片的索引就是**时间步** $t_i$，其中观测到的数据是一次**采样** '
            '$A_i$。把每个采样值在它的时间片上保持不变，就得到一个阶梯函数；随着 $N$ 增大，它与真实函数 '
            '$f(t)$ 的最大误差趋于零——采样序列可以任意精确地描述连续信号。'),
        "s1_signal": '信号 f(t)',
        "signal_price": '一天内的股价',
        "signal_wave": '正弦波',
        "signal_chirp": '啁啾信号（越来越快）',
        "s1_n": '时间步个数 N',
        "s1_numbers": (
            '取 **N = {n}** 个时间步（Δt = {dt:.4f}）时，最大误差为 **{err:.4f}**（在 t = {worst:.3f} '
            '处）；取 2N = {n2} 时为 **{err2:.4f}**，约缩小为原来的 1/{ratio:.2f}。'),
        "s1_f": 'f(t)',
        "s1_steps": '采样序列 A<sub>i</sub>',
        "s1_worst": '最大误差',
        "s1_time": '时间 t',
        "s1_error_x": '时间步个数 N',
        "s1_error_y": '最大误差 max |f(t) − A<sub>i</sub>|',
        "s1_tokens": (
            '文本本身就是采样好的序列：输入 **{text}** 就是 {m} 个时间步的序列 $x_1 \\dots x_{{{m}}}$，'
            '每个时间步一个符号，每个符号再变成一个向量 $x_t$（它的嵌入）。'),
        "s2": '2. RNN 单元：让网络拥有“记忆”',
        "s2_text": (
            '模仿人脑的阅读：读到第 $t$ 个时间步的符号，理解它，再与截至 $t-1$ 时刻的理解相整合。RNN '
            '单元是一个函数 $f_\\theta: (x_t, h_{t-1}) \\mapsto h_t$，**隐藏状态** $h_t$ 就是截至 $t$ 时刻的理解。'
            '最直观的整合方式是对 $h_{t-1}$ 与 $x_t$ 做线性组合（就像在调色板上调色），再加上非线性函数 '
            '$\\sigma$ 增强表达能力。'),
        "s2_gru_text": (
            '这个模型使用 **GRU** 单元：思想相同，但多了两个门——重置门 $r$ 决定忘掉多少 $h_{t-1}$，更新门 '
            '$z$ 决定保留多少。下面的数字就是这些门，用模型的权重手工算出。'),
        "s2_rows_rnn": [
            'h<sub>t−1</sub>',
            'x<sub>t</sub>',
            'W[h<sub>t−1</sub>; x<sub>t</sub>] + b',
            'h<sub>t</sub> = tanh(·)',
        ],
        "s2_rows_gru": [
            'h<sub>t−1</sub>',
            'x<sub>t</sub>',
            'r<sub>t</sub>（重置门）',
            'z<sub>t</sub>（更新门）',
            'n<sub>t</sub>（候选状态）',
            'h<sub>t</sub>',
        ],
        "s2_numbers": (
            '第 $t = {t}$ 步读入 **{token}**。第一个分量：${input_eq}$，因此 ${state_eq}$。'),
        "s2_numbers_gru": (
            '第 $t = {t}$ 步读入 **{token}**。第一个分量：$r_1 = {r:.4f}$，$z_1 = {z:.4f}$，$n_1 = {n:.4f}$，'
            '因此 ${state_eq}$。'),
        "s2_check": (
            '用模型权重手工计算（numpy，float64），再与 PyTorch 自带的 `{module}` 模块在同一输入上的结果比较：'
            '全部 {m} 个时间步中的最大差异为 **{diff:.1e}**。'),
        "s2_shown": '只显示 {H} 个分量中的前 {k} 个。',
        "s2_weights": '这个单元的权重 W = [W_hh, W_ih] 和偏置 b',
        "s2_component": '分量',
        "s3": '3. 参数共享',
        "s3_text": (
            '把 RNN 单元串联起来就构成一个 RNN 层。最初的想法是让每个时间步拥有自己的参数 $W_t$、$b_t$——**这是一个“错误”**：'
            '参数量随序列长度增长，需要更多数据、容易过拟合，而且为 $m$ 个时间步搭建的层对第 $m + 1$ '
            '步根本没有参数。'),
        "s3_fix": (
            '解法与 CNN 相同：让所有时间步**共享**同一组 $W$ 和 $b$。其中的归纳偏置是：序列的规律是稳态的（stationary）'
            '——在每个位置上应用的是同一套规则。'),
        "s3_latex_unshared": r"\text{不共享：}",
        "s3_latex_unshared_count": r"\ \text{个参数}",
        "s3_latex_shared": r"\text{共享：}",
        "s3_latex_shared_count": r"\ \text{个参数，与 } m \text{ 无关}",
        "s5_latex": r"\quad\text{要装下任意长度 } m \text{ 的 } x_1,\dots,x_m",
        "s3_hidden": '隐藏状态维度 H',
        "s3_embed": '输入维度 E',
        "s3_length": '序列长度 m',
        "s3_numbers": (
            '一层 RNN，$E = {E}$，$H = {H}$，长度 $m = {m}$：共享参数 **{shared:,}** 个（$H(H+E) + H$，'
            '与 $m$ 无关），不共享 **{unshared:,}** 个（是前者的 $m$ 倍）。'),
        "s3_shared": '共享的 W（所有时间步一个）',
        "s3_unshared": '不共享的 W_t（每个时间步一个）',
        "s3_x": '序列长度 m',
        "s3_y": '参数量',
        "s3_real": (
            '两个真实的模型，都在此处用**复制**任务训练，只见过长度 {lo}–{hi} 的输入：一个的编码器是共享参数的 '
            'tanh RNN，另一个的编码器不共享参数（$W_1 \\dots W_{{{hi}}}$）。试试长度超过 {hi} 的输入。'),
        "s3_try": '两个模型的输入',
        "s3_table_model": '模型',
        "s3_table_params": '编码器参数量',
        "s3_table_output": '输出',
        "s3_table_correct": '正确',
        "s3_shared_name": '共享 W',
        "s3_unshared_name": '不共享 W_t',
        "s3_failed": '无法运行',
        "s3_unshared_error": '不共享参数的模型拒绝了这个输入：{error}。',
        "s3_unshared_missing": (
            '不共享参数的模型无法运行：它只有 {limit} 个时间步的参数 W_1 … W_{limit}，而这个输入有 {m} '
            '个时间步——第 {next} 步没有 W_{next} 可用。（引擎原话：“{error}”。）'),
        "s3_shared_ok": (
            '共享参数的模型能处理任意长度（这里是长度 {m}）：它在每个时间步都使用同一个 W。它在没见过的长度上是否正确，'
            '是训练的问题，而不是有没有参数的问题。'),
        "s3_counts": (
            '两个编码器的真实参数量：共享 {shared:,}；不共享 {unshared:,} = {hi} × {per:,}。（PyTorch '
            '的 tanh RNN 存两个偏置向量 b_ih + b_hh = b，所以比 H(H+E) + H 多 H 个。）'),
        "s4": '4. 编码器-解码器',
        "s4_text": (
            '读入输入的 RNN 是**编码器**：它最后的隐藏状态把读到的一切融合、浓缩成一个**上下文向量**。'
            '另一个 RNN——**解码器**——以这个向量为初始状态，先输入开始标记 <sos>，每个时间步生成一个输出符号，'
            '再把它作为下一步的输入：这就是**自回归生成**，直到生成 <eos> 为止。原文的例子：'
            '“How can we use variable input lengths?” 译为“我们如何使用可变输入长度”——输入 7 个词，输出 12 个字；'
            '在上方选择 `eng-cmn` 或 `eng-fra`，即可用真实模型运行它。'),
        "s4_bi": (
            '这个编码器双向读取，所以上下文由读完最后一个符号的前向状态和读完第一个符号的后向状态拼接而成，'
            '再经一个小的线性层映射为 $s_0$。'),
        "s4_attends": (
            '这个模型也有注意力（见第 6 节）；这里只看它的上下文向量和解码循环。没有注意力的模型才是纯粹的编码器-解码器。'),
        "s4_states": '编码器隐藏状态 h₁ … hₘ（最后一个即上下文向量，已框出）',
        "s4_s0": 's₀：解码器对输入的全部了解——{n} 个数',
        "s4_chain": '从 <sos> 开始解码：每一步的输入都是上一步的输出',
        "s4_dist": '每一步的输出分布 ŷₜ（选中的符号已框出）',
        "s4_dist_x": '输出符号',
        "s4_dist_y": '时间步：输入 y<sub>t−1</sub> →',
        "col_step": 't',
        "col_fed": '输入 yₜ₋₁',
        "col_chosen": '输出 ŷₜ',
        "col_p": 'p(ŷₜ)',
        "col_truth": '正确符号',
        "col_top": '候选',
        "s4_result": '输出 **{output}** —— {verdict}',
        "correct": '正确 ✓',
        "wrong": '错误 ✗（正确答案是 {truth}）',
        "unknown_truth": '这个输入没有标准答案',
        "s5": '5. 信息瓶颈',
        "s5_text": (
            '编码器-解码器能处理变长输入和顺序，却把整个输入压缩成一个固定长度的向量。输入越长，前面的信息被稀释得越厉害——长距离依赖丢失了。'
            '这就是**信息瓶颈**。下图：层大小相同（隐藏层 {hidden}）的反转模型，都在长度 {lo}–{hi} 的反转任务上训练，一个有注意力、'
            '一个没有（参数量 {params}：注意力多出查询、键、值投影），在每个长度上用 {samples} 个新输入评分（与 `python -m explorer eval` 的数字相同）'
            '。'),
        "s5_none": '信息瓶颈曲线需要两个反转模型（有注意力和无注意力）：请放入或训练它们。',
        "s5_numbers": '在长度 {lengths} 上的完全正确率：',
        "s5_x": '输入长度（符号数）',
        "s5_y": '完全正确率（%）',
        "s5_trained": '训练长度',
        "s5_cost": '每台服务器只计算一次，耗时 {seconds:.1f} 秒，之后所有访问者共用。',
        "s6": '6. 注意力：查询、键、值',
        "s6_text": (
            '不再只依赖一个上下文向量，而是让解码器在每一步都**回头看**编码器的每一个隐藏状态 $h_i$。'
            '它要决定看哪里、找到后如何综合理解，而这些都带有不确定性——所以用概率来建模。在输出时间步 '
            '$t$：'),
        "s6_steps": (
            '1. 由上一步的输出和上一步的参考向量**更新解码器隐藏状态** $s_t$；\n2. 生成**查询** ${query_eq}$'
            '——解码器想补充什么信息；每个编码器状态有一个**键** ${key_eq}$——它所含信息的摘要，'
            '和一个**值** ${value_eq}$——它能提供的内容；\n3. 把每个键与查询做内积得到**得分**，'
            '用 softmax 变成概率，再求值的期望：参考向量 $c_t$；\n4. 由隐藏状态和参考向量**生成预测** '
            '$\\hat y_t$。'),
        "s6_db": (
            '可以把它看作一次**概率性数据库检索**：每个编码器状态是一条带键和值的记录；查询与每个键比对，'
            '得到匹配概率；返回按概率加权的值。'),
        "s6_step1": '第 1 步——隐藏状态：输入 $y_{{t-1}}$ = **{fed}**；$s_t$ 有 {H} 个数，前几个：{s}',
        "s6_step2": '第 2 步——查询：$q_t$ = {q}（{D} 个数）',
        "s6_step3": (
            '第 3 步——得分最高的记录是 $i = {i}$（“{token}”）：$e_{{t{i}}} = {e:.3f}$，因此 '
            '${weight_eq}$。'),
        "s6_step4": '第 4 步——预测：$\\hat y_t$ = **{chosen}**（p = {p:.4f}）；其次：{others}',
        "s6_table": '第 t 步的检索表',
        "col_record": '记录 i',
        "col_token": '输入 xᵢ',
        "col_key": '键 kᵢ',
        "col_score": '得分 eₜᵢ',
        "col_weight": '权重 αₜᵢ',
        "col_value": '值 vᵢ',
        "col_true": '正确位置',
        "s6_context": '参考向量 ${context_eq}$ = {c}',
        "s6_check": '用模型自己的数字核对：max |c_t − Σ_i α_ti v_i| = {ctx:.1e}{score}；权重之和为 {total:.6f}。',
        "s6_score_check": '；max |e_t − K q_t| = {e:.1e}',
        "s6_weights_y": '权重 α<sub>ti</sub>',
        "s6_weights_x": '记录 i（输入符号）',
        "s6_truth": '正确位置',
        "s6_heat_x": '输入位置 i',
        "s6_heat_y": '输出时间步 t',
        "s6_explore": '在“探索”页打开这一步',
        "s6_needs_attention": '这个模型没有注意力，请选择一个有注意力的模型。',
        "s6_scaling": (
            '**缩放改变了什么。** 分数 $e = q\\cdot k$ 是 $D$ 个乘积之和（这里 $D$ = {D}），所以它在各输入之间的'
            '离散程度随维度按 $\\sqrt{{D}}$ 增长；分数相差很大时，softmax 几乎把全部权重给一个输入，梯度也几乎为零。'
            '缩放点积除以 $\\sqrt{{D}}$ = {sqrtD:g}。随附的几个孪生模型用同样的方式在“反转”任务上训练，'
            '训练后的结果是：`{dot}`（点积）：分数标准差 {dot_spread:.1f}，平均最大权重 {dot_peak:.3f}；'
            '`{scaled}`（缩放点积）：分数标准差 {scaled_spread:.1f}，但除法之前的 $q\\cdot k$ 标准差为 '
            '{scaled_raw:.1f}：训练把向量变长，直到选择和原来一样清晰（平均最大权重 {scaled_peak:.3f}）。'
            '两者都学会了任务（完全匹配 {dot_exact:.0%} 和 {scaled_exact:.0%}）；缩放最重要的是训练刚开始时，'
            '它让 softmax 不至于饱和。'),
        "s6_scaling_more": ' `{name}`（{kind}）：平均最大权重 {peak}，完全匹配 {exact:.0%}。',
        "s6_scaling_where": '在同样的 {n} 个新输入上测得；“比较”页把这些孪生模型并排展示。',
        "s7": '7. 注意力是解释吗？',
        "s7_text": (
            '注意力告诉我们模型在每一步**看向哪里**。这就是它这样输出的**原因**吗？注意力权重并不是为回答这个问题而设计的，'
            '这个问题本身也有专门的研究（Jain & Wallace 2019《Attention is not Explanation》；Wiegreffe & Pinter 2019'
            '《Attention is not not Explanation》；Serrano & Smith 2019）。下面在真实模型上做两个检验：'),
        "s7_tests": (
            '1. **换一种方式问输入。** 对选中的输出 $y_t$（前缀不变）给每个输入 $x_i$ 打分：**梯度 × 输入**（$y_t$ 的得分'
            '（logit）随 $x_i$ 变化的快慢乘以 $x_i$）、**积分梯度**（沿着从平均输入出发的路径把梯度累加起来，Sundararajan '
            '等 2017）和**擦除**（只在这一步把 $x_i$ 对注意力隐藏后 $\\log p(y_t)$ 下降多少）。如果 α 解释了这一步，它们应当指向 α 所指的地方。\n'
            '2. **换掉 α 再看。** 把 ${alpha_t}$ 换成它自己的随机重排、均匀分布，以及一个对抗的 α——在输出几乎不变的前提下'
            '离 ${alpha_t}$ 尽可能远——然后只把这一步重新解码。如果 α 解释了这一步，一个很不同的 α 应当改变输出。'),
        "s7_alpha": '注意力 α',
        "s7_gxi": '梯度 × 输入',
        "s7_ig": '积分梯度',
        "s7_erasure": '擦除',
        "s7_heat_title": 'α 与各种归因：行是时间步，列是输入',
        "s7_computing": '正在解释每一步……',
        "s7_step": (
            '第 {t} 步模型选择了 **{chosen}**。它最大的权重 α 落在 $x_{{{ia}}}$“{ta}”上；梯度 × 输入指向 '
            '$x_{{{ig}}}$“{tg}”，积分梯度指向 $x_{{{ii}}}$“{ti}”{ig_note}，擦除指向 $x_{{{ie}}}$“{te}”。'),
        "s7_ig_note": '（这一步没有收敛：路径跨过了输出的一次跳变）',
        "s7_sentence": (
            '在整句（{steps} 个时间步）上，梯度 × 输入、积分梯度和擦除的最重要输入与 α 所选的相同的比例分别为 '
            '{g:.0%}、{i:.0%} 和 {e:.0%}（两种排序的 Kendall τ：{tg:.2f}、{ti:.2f}、{te:.2f}；1 表示顺序相同）。'),
        "s7_counter_title": '第 {t} 步：换掉 α 后重新解码这一步',
        "s7_counter_step": '第 {t} 步：{perm}；{uni}；{adv}。',
        "s7_kept": '{kind}仍输出 **{tok}**（输出分布的 TVD 变化 {tvd:.2f}）',
        "s7_changed": '{kind}把它变成 **{tok}**（TVD {tvd:.2f}）',
        "s7_perm": '重排后的 α',
        "s7_uni": '均匀的 α',
        "s7_adv": '离 α {jsd:.2f}（JSD）的对抗 α',
        "s7_nothing": '**这里 α 的大幅改变什么也没改变**：这一步还有别的注意力能给出同样的输出，所以这个 α 只是它的解释之一。',
        "s7_flips": (
            '在整句上，最可能的输出在 {steps} 个时间步中有 {perm} 步因重排的 α 而改变，{uni} 步因均匀的 α 而改变，'
            '{adv} 步因对抗的 α 而改变（对抗的 α 让每一步的输出都保持在 ε = {eps:g} 之内）。'),
        "s7_reading": (
            '把两个检验放在一起看。归因与 α 一致、且换一个 α 就改变输出的地方，α 忠实地说明了这一步；'
            '换一个 α 输出却不变的地方，α 只是几种说法之一：合理，但没有被证明。试试反转模型和翻译模型，长输入和短输入。'),
        "s7_none": '这个模型没有注意力：这里只显示它的归因，没有 α 可以比较，也没有 α 可以替换。',
        "s7_explore": '在“探索”页打开这一步及其“注意力是解释吗？”部分',
        "summary": (
            '从时间步到带记忆的单元，从参数共享到编码器-解码器，从信息瓶颈到注意力，再从注意力到它是否构成解释：'
            '每一步都回答了上一步留下的问题。'),
    },
}


def text(lang: str):
    """The text table of a language (English if unknown)."""
    return TEXT.get(lang, TEXT["en"])
