"""Cue lexicons (English and Chinese) that signal what kind of question is being asked.

Each cue group is one regular expression; English phrases match on word boundaries, Chinese phrases as
substrings (Chinese has no spaces). The groups are deliberately about the *form* of a question (scope,
summary, comparison, causality, time, relations, rewriting, fact look-up), not about any dataset's topics,
so they carry over to corpora the model has never seen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class CueGroup:
    name: str
    reason: str  # how the group is described to a user; `{m}` is replaced by the matched phrases
    pattern: re.Pattern[str]


def _group(name: str, reason: str, english: tuple[str, ...], chinese: tuple[str, ...]) -> CueGroup:
    parts = []
    if english:
        parts.append(r"\b(?:" + "|".join(english) + r")\b")
    if chinese:
        parts.append("(?:" + "|".join(chinese) + ")")
    return CueGroup(name, reason, re.compile("|".join(parts), re.IGNORECASE))


CUE_GROUPS: tuple[CueGroup, ...] = (
    _group(
        "scope", "asks about the whole collection ({m})",
        (r"across (?:all|the|every)\w*", r"all (?:the )?(?:documents?|sources?|articles?|reports?|episodes?|files?|papers?|"
         r"stories|tales|texts?|records|notes|filings|letters|data|transcripts|materials|chronicles|memos)",
         r"overall", r"in general", r"generally", r"as a whole", r"throughout", r"(?:the|this|whole|entire) "
         r"(?:dataset|data set|corpus|collection|archive|knowledge base)", r"everything", r"whole",
         r"entire", r"big picture", r"high[- ]level", r"broad(?:ly)?", r"at large", r"looking at everything",
         r"every (?:document|source|article|report|episode|chapter)"),
        ("所有", "全部", "整个", "整体", "总体", "总的来说", "纵观", "全书", "整本", "数据集", "语料", "大体",
         "从整体", "全部材料", "一切", "总而言之", "通篇", "全集"),
    ),
    _group(
        "theme", "asks for themes or topics ({m})",
        (r"themes?", r"motifs?", r"topics?", r"main ideas?", r"key (?:points|ideas|insights|takeaways|issues)",
         r"takeaways?", r"narratives", r"storylines", r"common threads?", r"overarching", r"what is .{0,40} (?:mostly|"
         r"generally) about", r"(?:main|major|key|central|dominant|recurring) (?:\w+ )?(?:themes|topics|ideas|issues|"
         r"concerns|risks|trends|patterns|characters|arguments|messages)"),
        ("主题", "话题", "要点", "核心", "基调", "主旨", "中心思想", "主要的", "主要"),
    ),
    _group(
        "summary", "asks for a summary or overview ({m})",
        (r"summari[sz]e", r"summary", r"overview", r"recap", r"in a few sentences", r"in (?:one|two|three) sentences",
         r"gist", r"synthesi[sz]e", r"outline"),
        ("概括", "总结", "归纳", "概述", "综述", "概览", "梳理一下整体", "几句话"),
    ),
    _group(
        "trend", "asks for trends or what is most/least common ({m})",
        (r"trends?", r"most (?:common|often|frequent(?:ly)?|discussed|mentioned|important|prominent|cited)",
         r"least (?:common|discussed|mentioned|frequent)", r"recurr(?:ing|ent)", r"again and again", r"dominant",
         r"dominate[sd]?", r"frequent(?:ly)?", r"patterns?", r"rank", r"top (?:\d+|three|five|ten)", r"prevalent",
         r"widespread", r"the most"),
        ("趋势", "最常", "最多", "最少", "反复", "规律", "突出", "频繁", "普遍", "最受关注", "排名"),
    ),
    _group(
        "comparison", "compares entities or accounts ({m})",
        (r"compare[sd]?", r"comparison", r"compared (?:to|with)", r"differ(?:s|ed|ent|ently|ence|ences)?",
         r"similarit(?:y|ies)", r"similar", r"versus", r"vs\.?", r"whereas", r"while (?:the|a|an|\w+'s)",
         r"consistent(?:ly)?", r"inconsisten(?:t|cy)", r"discrepanc(?:y|ies)", r"contrast(?:s|ing)?", r"bigger impact",
         r"more (?:than|important)"),
        ("比较", "区别", "不同", "异同", "差异", "一致", "矛盾", "相比", "对比", "更大", "相同"),
    ),
    _group(
        "causal", "asks about causes or effects ({m})",
        (r"why", r"because", r"caus(?:e|ed|es|ing)", r"led (?:to|\w+ to)", r"lead to", r"leads to", r"result(?:ed)? in",
         r"consequences?", r"effects?", r"affect(?:s|ed)?", r"impact(?:s|ed)?", r"influenc(?:e|ed|es)", r"due to",
         r"what if", r"if .{1,60} had(?:n't| not)?", r"contribut(?:e|ed) to", r"explain(?:s)? (?:how|why)", r"reasons?"),
        ("为什么", "导致", "原因", "影响", "后果", "因果", "造成", "为何", "起了什么作用", "推动"),
    ),
    _group(
        "relation", "asks how entities are related ({m})",
        (r"relationships?", r"relations?", r"connect(?:ed|ion|ions|s)?", r"link(?:ed|s)? (?:to|with|between)",
         r"links", r"between", r"interact(?:ion|ions|ed|s)?", r"related", r"together", r"through", r"involvement",
         r"in relation to", r"associated with each other", r"tension", r"conflict with"),
        ("关系", "联系", "之间", "关联", "互动", "合作", "冲突", "牵连"),
    ),
    _group(
        "time", "asks about change over time or the order of events ({m})",
        (r"before", r"after", r"timeline", r"evolv(?:e|ed|es)", r"chang(?:e|ed|es)", r"over time", r"since",
         r"subsequent(?:ly)?", r"later", r"came first", r"published on", r"from .{1,40} to .{1,40}", r"then",
         r"remained", r"still", r"trace"),
        ("之前", "之后", "时间线", "演变", "变化", "然后", "先是", "前后", "从.{1,20}到", "后来", "仍然"),
    ),
    _group(
        "creative", "asks to rewrite or narrate events involving specific entities ({m})",
        (r"rewrite", r"retell", r"narrate", r"write (?:a|an)", r"draft", r"compose", r"imagine", r"point of view",
         r"perspective", r"as a (?:news|newspaper)", r"transform .{1,60} into", r"in the voice of"),
        ("改写", "讲述", "视角", "口吻", "写一份", "写一篇", "想象", "改编"),
    ),
    _group(
        "identify", "asks to identify one entity from its description ({m})",
        (r"(?:which|what) (?:\w+ ){0,2}?(?:company|companies|person|individual|organi[sz]ation|team|player|club|country|"
         r"city|town|entity|platform|firm|character|drug|book|court|product|group|brand|athlete|politician|official|"
         r"agency|network|outlet|one)", r"who is the (?:\w+ ){0,3}?(?:individual|person|player|man|woman|one|figure|"
         r"executive|founder|athlete|author)", r"who (?:\w+ ){0,2}?(?:who|that|whose)", r"name the"),
        ("哪个人", "哪家", "哪个机构", "哪一位", "哪位", "哪个组织", "哪支", "哪个公司", "是哪个"),
    ),
    _group(
        "fact", "asks for a specific fact ({m})",
        (r"who (?:is|was|are|were)", r"what (?:is|was) the (?:name|date|year|number|amount|dose|address|title)",
         r"where (?:is|was|did|does)", r"when (?:did|was|is|does)", r"what year", r"how (?:many|much|old|long)",
         r"which (?:\w+ )?(?:company|person|organi[sz]ation|court|club|team|town|city|year|book|version|gene)",
         r"name of", r"according to", r"what (?:did|does) .{1,40} (?:say|do)", r"what title"),
        ("是谁", "哪里", "哪一年", "多少", "什么名字", "在哪", "什么身份", "谁是", "叫什么", "几"),
    ),
)

CUE_NAMES: tuple[str, ...] = tuple(group.name for group in CUE_GROUPS)


def match_cues(text: str) -> dict[str, list[str]]:
    """Return, for every cue group that fires, the phrases that matched (in order, deduplicated)."""
    found: dict[str, list[str]] = {}
    for group in CUE_GROUPS:
        hits = group.pattern.findall(text)
        if hits:
            unique = list(dict.fromkeys(hit.strip().lower() for hit in hits if hit.strip()))
            if unique:
                found[group.name] = unique
    return found


REASON_TEMPLATES: dict[str, str] = {group.name: group.reason for group in CUE_GROUPS}
