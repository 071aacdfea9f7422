"""The checkers' verdicts and named mistakes in the notebook's language (issue 22).

A checker explains a mistake in English, with the numbers of the probe that caught it (shapes,
values). This catalogue adds, for every mistake *code*, a short explanation in Chinese written
from the glossary (``translations/glossary.md``): in a Chinese notebook a result shows the verdict
and that explanation in Chinese, then the checker's own English details. The checkers are not
copied: one English checker, one catalogue per language. ``tests/checks/test_messages.py`` fails
when a checker raises a code that the catalogue does not name.

The language (:mod:`lectures_lib.languages`: the course's one list of them, and the rules that
choose it) comes from the environment or the notebook's folder.
"""

from __future__ import annotations

from ..languages import ENV, LANGUAGES, normalise_language, notebook_language  # noqa: F401

__all__ = ["LANGUAGES", "normalise_language", "notebook_language", "localise", "MISTAKES"]

VERDICTS = {"zh-Hans": ("通过", "未通过"), "zh-Hant": ("通過", "未通過")}
DETAILS = {"zh-Hans": "检查器的详细说明（英文）", "zh-Hant": "檢查器的詳細說明（英文）"}
PASSED = {"zh-Hans": "所有检查都通过了。", "zh-Hant": "所有檢查都通過了。"}
UNKNOWN = {"zh-Hans": "结果与参考实现不一致。", "zh-Hant": "結果與參考實作不一致。"}

# code -> the mistake in Simplified Chinese (the lecture's terms: translations/glossary.md)
MISTAKES: dict[str, str] = {
    "not_implemented": "函数还没有实现（仍然抛出 NotImplementedError）。",
    "timed_out": "函数在时限内没有返回（死循环或 sleep？）。",
    "returned_none": "函数返回了 None：忘了写 `return`？",
    "not_callable": "传给检查器的不是函数本身：传入函数，不要调用它。",
    "raised": "函数在某个测试输入上出错（抛出了异常）。",
    "checker_error": "检查器自身没能完成检查：这多半是检查器的 bug，请报告。",
    "modified_input": "函数原地修改了输入张量（如 `x /= ...`）：请计算新的张量。",
    "wrong_return_type": "返回值的类型不对（例如应当返回一对张量 `(out, weights)`）。",
    "not_a_tensor": "返回的不是 torch 张量（而是 NumPy 数组、列表等）。",
    "not_floating": "返回的是整数、布尔或复数张量，应当是浮点张量。",
    "outputs_swapped": "返回顺序反了：应当先返回 `out`，再返回 `weights`。",
    "weights_transposed": "注意力权重转置了：形状应为 (..., n_q, n_k)，每个查询一行，每个键一列。",
    "transposed": "结果转置了：行应当是位置，列是特征。",
    "transposed_weights": "权重矩阵用法不对：应当是 x @ W，而不是 nn.Linear 式的 x @ W.T。",
    "wrong_shape": "输出的形状不对。",
    "extra_batch_dimension": "多了一个批次维度：应返回 (n_positions, d_model)。",
    "wrong_dtype": "输出的数据类型（dtype）不对。",
    "wrong_signature": "函数的参数与题目要求的不一致（例如不接受 mask 参数）。",
    "missing_scaling": "分数没有除以 √d_k（缩放点积注意力的“缩放”）。",
    "wrong_scaling": "分数除以的不是 √d_k。",
    "scaled_by_d_model": "分数除以了 √d_model，应当除以每个头的 √d_head。",
    "scaled_values": "拆分/合并头时把数值乘了一个因子：这一步只改变形状。",
    "scaled_like_dot_product": "加性注意力的分数不需要除以 √d：那是点积注意力的缩放。",
    "softmax_wrong_axis": "softmax 的方向不对：应当在键所在的最后一维上归一化。",
    "missing_softmax": "直接把原始分数当成了权重：缺少 softmax。",
    "relu_instead_of_softmax": "用 ReLU 代替了 softmax：权重之和不再为 1。",
    "relu_instead_of_tanh": "加性注意力的分数应当用 tanh，而不是 ReLU。",
    "missing_tanh": "加性注意力的分数漏掉了 tanh。",
    "returned_scores": "返回的权重是 softmax 之前的分数。",
    "wrong_output": "权重是对的，但输出不是 weights @ v。",
    "mask_ignored": "掩码没有起作用。",
    "mask_inverted": "掩码用反了：True 表示“可以关注”。",
    "inverted_polarity": "掩码的真假反了：本课程中 True 表示“可以关注”（与 nn.MultiheadAttention 相反）。",
    "mask_after_softmax": "在 softmax 之后才把被遮住的位置置零，每行的权重之和不再为 1。",
    "mask_filled_with_zero": "被遮住的分数被设成了 0（或乘以掩码）：应当在 softmax 之前设成 -inf。",
    "masked_weights_not_zero": "被遮住的位置仍有很小的非零权重：填充值不够负。",
    "additive_float_mask": "返回的是浮点型的加性掩码（0 与 -inf），本课程要求布尔掩码。",
    "diagonal_missing": "对角线是 False：位置 i 必须能关注它自己（因果是 j ≤ i，不是 j < i）。",
    "future_visible": "某个查询可以关注后面的键：解码器会看到还没生成的 token（因果掩码不对）。",
    "future_ignored": "窗口从不看未来的帧：也应当包含 i + 1 … i + future。",
    "past_future_swapped": "窗口的过去和未来弄反了。",
    "looks_ahead": "窗口看到了未来的键（j > i）：流式识别时查询 i 只能看过去的帧 i - past … i。",
    "window_off_by_one": "窗口差了一个键：查询 i 看 i - past … i，共 past + 1 个键（包括它自己）。",
    "score_zero_not_weight_zero": "把窗口外的分数设成了 0：分数为 0 时权重是 e⁰ / Z，不是 0。"
                                  "窗口外的权重必须为 0，也就是分数设为 -inf（或不让这些键参与 softmax）。",
    "not_renormalised": "先对所有键做 softmax，再去掉窗口外的键：剩下的权重之和不再为 1。"
                        "softmax 只应在窗口内的键上做。",
    "padding_attended": "前几个查询也关注了位置 0 之前补的零（零向量键的分数是 0，仍然分到权重）："
                        "要遮住填充的位置，它们不是键。",
    "boundary_excluded": "窗口少了一端：i - past 和 i + future 也要包含在内（用 ≤，不是 <）。",
    "one_direction": "只允许了 j ≤ i（因果形式）：步长注意力是双向的。",
    "absolute_positions": "步长注意力看的是距离 (i - j) 是否为步长的倍数，而不是位置本身。",
    "padding_keys_visible": "填充位置的键仍然得到了权重：每个头都要遮住它们（填充掩码）。",
    "padded_rows_not_zeroed": "填充位置上的输出没有置为 0。",
    "off_by_one": "掩码差了一个位置：位置从 0 开始数，i < length 才是真实 token。",
    "overflow": "分数很大时出现 NaN 或 inf：做 exp 之前先减去每行的最大值。",
    "non_finite": "在普通输入上出现了 NaN 或 inf。",
    "not_finite": "结果中含有 inf 或 NaN。",
    "nan": "结果中含有 NaN（0/0、负数开方或取对数，或整行都被遮住）。",
    "low_precision": "float64 的结果只有 float32 的精度。",
    "nondeterministic": "同样的输入两次结果不同：函数带有随机性（忘了关掉 dropout？）。",
    "heads_mixing_channels": "拆分多头时取错了特征：每个头应当是一段连续的特征，而不是每隔 num_heads 取一个。",
    "reshape_without_transpose": "拆分或合并多头时只做了 reshape 而没有转置，头与位置混在了一起。",
    "transpose_before_reshape": "先转置再 reshape，顺序不对。",
    "weights_averaged": "把各个头的权重取了平均（nn.MultiheadAttention 的默认行为），应当分别返回每个头的权重。",
    "missing_output_projection": "拼接多个头之后没有乘输出矩阵 W^O。",
    "wrong_frequency": "位置编码的频率 1 / 10000^(2i/d) 不对。",
    "sin_cos_swapped": "sin 和 cos 放反了：偶数维是 sin，奇数维是 cos。",
    "not_interleaved": "sin 和 cos 应当逐维交替，而不是前一半 sin、后一半 cos。",
    "positions_from_one": "位置从 1 开始数了，应当从 0 开始。",
    "odd_d_model": "d_model 为偶数时正确，为奇数时出错。",
    "fixed_rank": "只对 (batch, seq, d) 三维输入正确：应当对任意形状 (..., d) 的最后一维归一化。",
    "orders_swapped": "Post-LN 与 Pre-LN 的顺序弄反了：Post-LN 是 norm(x + sublayer(x))。",
    "centred": "减去了均值：那是 LayerNorm；RMSNorm 不做中心化。",
    "no_gamma": "没有乘上 gamma。",
    "mean_abs": "用了 |x| 的均值，而不是 x² 的均值。",
    "eps_hard_coded": "eps 写成了常数：请使用参数 `eps`。",
    "eps_outside_sqrt": "eps 加在了平方根外面：应当是 sqrt(mean(x²) + eps)。",
    "wrong_default_eps": "不传 eps 时使用的默认值不对。",
    "wrong_axis": "归一化的维度不对：应当在最后一维（特征）上，dim=-1。",
    "unbiased_variance": "用了无偏方差（除以 d - 1，`torch.var` 的默认）：LayerNorm 用有偏方差（除以 d）。",
    "eps_ignored": "结果忽略了 eps（与 eps = 0 相同）：应除以 sqrt(方差 + eps)，用传入的 eps。",
    "no_affine": "没有用 gamma 和 beta：应返回 gamma * 归一化结果 + beta。",
    "gamma_beta_swapped": "gamma 和 beta 用反了：gamma 是缩放（乘），beta 是平移（加）。",
    "no_beta": "没有加上 beta。",
    "no_centering": "除之前没有减去均值：归一化结果 = (x - 均值) / sqrt(方差 + eps)。",
    "std_not_variance": "除以的是 sqrt(标准差 + eps)：应除以标准差 sqrt(方差 + eps)。",
    "residual_missing": "缺少残差连接：要把输入 x 加回来，Y = X + H(X)。",
    "norm_missing": "缺少 LayerNorm：要调用一次 norm(...)。",
    "norm_on_output": "只对子层的输出做了归一化 x + norm(sublayer(x))：Post-LN 归一化的是和 "
                      "norm(x + sublayer(x))，Pre-LN 归一化的是子层的输入 x + sublayer(norm(x))。",
    "norm_twice": "前后各做了一次 LayerNorm：Post-LN 只归一化和，Pre-LN 只归一化子层的输入。",
    "bias_missing": "没有加上相对位置偏置：分数只是普通点积。",
    "bias_after_softmax": "偏置必须在 softmax 之前加到分数上。",
    "offset_sign": "偏移方向反了：应当是 j - i（键减查询）。",
    "wrong_head": "每个头都用了第 0 个头的偏置：每个头 h 有自己的一行 bias[h]。",
    "history_ignored": "只按这一步的对数概率排序：假设的分数是所有对数概率之和。",
    "index_decoding": "从展平的分数中还原束和词时除数不对：index // vocab 是束，index % vocab 是词。",
    "one_word_per_beam": "每个束只保留了最好的一个词：同一个束接上的两个词可能都在前 k 名之中。",
    "worst_first": "顺序反了：应当先返回分数最高的候选。",
    "bos_included": "解码结果以起始符 BEGIN 开头：去掉第 0 列。",
    "smoothing_ignored": "标签平滑没有起作用：这只是普通的交叉熵。",
    "spread_over_other_classes": "ε 只分给了其余 C - 1 个类别；本课程（和 F.cross_entropy）把它分给全部 C 个类别。",
    "sum_not_mean": "对目标求了和：应当对未被忽略的目标取平均。",
    "ignored_targets_counted": "等于 ignore_index 的目标仍然被计入：求和与计数时都要排除它们。",
    "missing_normalisation": "乘积大了 m 倍：特征要除以 √m。",
    "missing_scale": "只用 sin 和 cos 估计的是高斯核：还要乘以 exp(|x|²/2)。",
    "wrong_sign": "缩放因子的符号不对：应当是 exp(+|x|²/2)。",
    "at_chance": "模型在留出数据上不比随机水平好：训练了吗？检查的是训练好的那个模型吗？",
    "below_target": "留出数据上的准确率没有达到要求：多训练几轮、加大学习率或稍微加大模型。",
    "wrong_values": "结果与参考实现不一致（不属于已知的常见错误）。",
    "returned_characters": "返回的是一个个字：要把每个词的字连起来（词在 E 或 S 之后结束）。",
    "single_not_a_word": "标 S 的字自己就是一个词（它开始的词也在它这里结束）。",
    "wrong_words": "由 B/M/E/S 标签还原出的词与参考实现不一致。",
    "content_blind": "模型只看到了词袋（token 的多重集合），没有按内容检索：打乱位置后答案不变。"
                     "它需要用查询去比对每一对的键（q · k 注意力），并区分前后两半（位置）。",
    "not_a_model": "交上来的不是训练好的模型（或者权重被打乱后仍然答对：那是手写的规则，不是学到的）。",
    "trained_elsewhere": "模型在评分时的任务变体上没有达到要求，在公开任务上却达到了：权重是在评分之前训练好的，"
                         "不是由你的训练函数训练的。评分时数据函数会为这份作业生成它自己的任务变体"
                         "（token 换了顺序）：请在训练函数里用数据函数给出的数据训练模型。",
    "one_tensor_decides": "除了一个权重张量以外，其余权重全部打乱后模型仍然答对：答案来自只需要这几个值保持不变的"
                          "手写规则，而不是一起训练出来的权重。请用层（嵌入、注意力、前馈网络）搭建模型并训练它们。",
    "fragile_weights": "给每个权重张量加上极小的噪声（其大小的千分之一），模型就崩溃了，或者 logits 一点都没有变："
                       "训练好的模型几乎察觉不到这样的变化，只在权重取精确值时才作答的规则才会这样。请训练权重，不要检测它们。",
    "quadratic_memory": "内存随 N 平方增长：函数构造了 N × N 的张量。每个查询只应看到它窗口中的键。",
    "rule_chosen_on_test": "每个查询 token 的答案是在留出数据的标签上选出来的：那是第 7 节的上限，看过答案之后才选。"
                           "应当在训练集上选答案，再在测试集上评分。",
    "rule_reads_first_token": "读的是位置 0 的 token：查询（要问的那个键）是每个序列的最后一个 token，tokens[:, -1]。",
    "rule_ignores_query": "对每个序列都回答训练集里最常见的标签（多数类）：规则要为每个查询 token 回答它自己在训练集里最常见的标签。",
    "rule_unseen_query": "只给查询 token 在训练集中出现过的测试序列评了分：每个测试序列都要计入，训练中没见过的查询 token "
                         "回答训练集里最常见的标签。",
    "count_not_share": "返回的是答对的个数：应当返回比例（0 到 1 之间的浮点数），即个数除以测试序列的数目。",
    "invalid_recipe": "配方不合要求：某个字段不存在、类型不对或超出了允许的范围（详见英文说明）。",
    "carries_data": "配方里夹带了数据（句子或翻译）：配方只能写设置。评分时只用训练句对训练，"
                    "测试句子你的代码看不到，交上来的句子不会被使用。",
    "over_budget": "训练超出了每份作业的 CPU 时间预算：请把配方改小（更少的轮数、更小的 d_model 或 d_ff、"
                   "更少的层、更大的批次）。",
    "diverged": "训练发散了（损失变成了 NaN）：请降低学习率或加长预热。",
    "projected_over_budget": "按这次试训每一步的耗时推算，评分时的完整训练会超出每份作业的 CPU 时间预算，"
                             "评分程序会中途停下、不给分：请把配方改小（更少的轮数、更小的 d_model 或 d_ff、"
                             "更少的层、更大的批次）。",
    "not_learning": "试训时损失没有下降：模型连一个批次都没学会。请检查学习率（太小学不动，太大会越过最低点）和预热。",
    "below_tier": "BLEU 没有达到这一档的要求：训练好的模型翻译得还不够好（详见英文说明中的分数）。",
}


def _hant() -> dict[str, str]:
    from ._messages_zh_hant import MISTAKES_ZH_HANT

    return MISTAKES_ZH_HANT


def localise(passed: bool, message: str, mistake: str | None,
             language: str | None = None) -> tuple[str, str] | None:
    """(verdict, message) in ``language`` (default: :func:`notebook_language`); None for English.

    The message is the catalogue's explanation of ``mistake``, then the checker's English
    details, which hold the probe's numbers.
    """
    language = notebook_language() if language is None else normalise_language(language)
    if language == "en":
        return None
    verdict = VERDICTS[language][0 if passed else 1]
    if passed:
        return verdict, f"{PASSED[language]}\n{DETAILS[language]}：{message}"
    table = MISTAKES if language == "zh-Hans" else _hant()
    explained = table.get(mistake or "", UNKNOWN[language])
    return verdict, f"{explained}（{mistake}）\n{DETAILS[language]}：{message}"
