"""Builds the project's own labelled routing question set, `router/data/questions.jsonl`.

Run `python -m router.question_bank` to rewrite the file (deterministic, seeded).

The set has two parts:

* hand-written questions (`router/data/handwritten.jsonl`), written for this project in English and Chinese;
* questions expanded from many templates per class and language, filled with entities, aspects and events
  from fourteen domains. Every class has templates of several shapes (wh-questions, yes/no, imperatives,
  long multi-clause questions, news-style "according to X" questions) so that no single surface pattern
  identifies a class.

Label semantics (what the router should do with the question):

* ``local``  - a fact about one or a few named entities, answerable from their graph neighbourhood;
* ``global`` - about the whole corpus: themes, trends, summaries, most/least, overall patterns;
* ``drift``  - reasoning across several entities or chunks (comparison, cause and effect, how X led to Y,
  timelines, multi-hop links, scoped summaries and rewrites), but scoped to specific entities.

Each generated row also records the entity strings it was filled with (`entities`), which the trainer uses
to simulate index-linking signals.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
OUTPUT = DATA_DIR / "questions.jsonl"
HANDWRITTEN = DATA_DIR / "handwritten.jsonl"
SEED = 20261129


@dataclass(frozen=True)
class Domain:
    name: str
    people: tuple[str, ...]
    things: tuple[str, ...]  # organisations, places, works, drugs, products...
    sources: tuple[str, ...]  # where facts come from: outlets, chapters, filings...
    aspects: tuple[str, ...]  # "the pricing strategy", "his reputation"...
    actions: tuple[str, ...]  # past-tense verb phrases
    corpus: tuple[str, ...]  # names for the whole collection
    topics: tuple[str, ...]  # corpus-level topics
    kinds: tuple[str, ...]  # plural nouns for things a corpus contains
    zh_people: tuple[str, ...]
    zh_things: tuple[str, ...]
    zh_sources: tuple[str, ...]
    zh_aspects: tuple[str, ...]
    zh_actions: tuple[str, ...]
    zh_corpus: tuple[str, ...]
    zh_topics: tuple[str, ...]
    zh_kinds: tuple[str, ...]


DOMAINS: tuple[Domain, ...] = (
    Domain(
        "fiction",
        ("Eliza Marlowe", "Captain Thorne", "Old Jonah", "Mrs. Penhallow", "Tobias Crane", "Little Wren"),
        ("the Blackwater Inn", "the silver locket", "Ravensmoor Hall", "the lighthouse", "the Guild of Clerks"),
        ("chapter three", "the opening chapter", "the final letter", "the epilogue", "the second volume"),
        ("loyalty", "motives", "inheritance", "reputation", "secret past"),
        ("left the village", "burned the letters", "broke the engagement", "returned from sea", "hid the will"),
        ("the novel", "the whole book", "these stories", "the collected tales", "the saga"),
        ("love and betrayal", "social class", "memory", "the sea", "redemption"),
        ("themes", "motifs", "conflicts", "symbols", "settings"),
        ("林黛玉", "沈青山", "老周", "苏小婉", "顾长风", "阿福"),
        ("黑水客栈", "银锁", "落雁山庄", "灯塔", "镖局"),
        ("第三章", "开篇", "最后一封信", "尾声", "第二卷"),
        ("忠诚", "动机", "身世", "名声", "秘密"),
        ("离开了村子", "烧掉了信", "解除了婚约", "出海归来", "藏起了遗嘱"),
        ("这部小说", "整本书", "这些故事", "全书", "这部长篇"),
        ("爱情与背叛", "阶级", "记忆", "大海", "救赎"),
        ("主题", "意象", "冲突", "象征", "场景"),
    ),
    Domain(
        "business",
        ("Dana Whitfield", "Raj Malhotra", "Sofia Brandt", "Marcus Lee", "Helen Okafor"),
        ("Northwind Logistics", "Aurora Foods", "Kestrel Semiconductors", "the Lisbon office", "Project Falcon"),
        ("the annual report", "the Q3 earnings call", "the board minutes", "the investor memo", "the press release"),
        ("pricing strategy", "market share", "hiring plans", "supply chain", "profit margin"),
        ("acquired a rival", "cut prices", "closed the plant", "replaced the CEO", "entered the Asian market"),
        ("all the company documents", "the whole dataset", "these board minutes", "the corpus of filings", "the archive"),
        ("cost cutting", "digital transformation", "employee morale", "sustainability", "competition"),
        ("strategies", "risks", "initiatives", "challenges", "priorities"),
        ("王建国", "李娜", "陈思远", "赵敏", "刘洋"),
        ("华信物流", "晨光食品", "启明半导体", "深圳分公司", "猎鹰项目"),
        ("年报", "三季度财报电话会", "董事会纪要", "投资者备忘录", "新闻稿"),
        ("定价策略", "市场份额", "招聘计划", "供应链", "利润率"),
        ("收购了竞争对手", "降价", "关闭了工厂", "更换了首席执行官", "进入了东南亚市场"),
        ("所有公司文件", "整个数据集", "这些董事会纪要", "全部公告", "这份档案"),
        ("降本增效", "数字化转型", "员工士气", "可持续发展", "行业竞争"),
        ("战略", "风险", "举措", "挑战", "重点"),
    ),
    Domain(
        "medicine",
        ("Dr. Amara Singh", "Dr. Felix Novak", "Nurse Kowalski", "Professor Hale", "Dr. Yuki Tanaka"),
        ("metformin", "the CARDIO-2 trial", "St. Brigid's Hospital", "type 2 diabetes", "the BRCA1 gene"),
        ("the clinical guideline", "the discharge summary", "the trial protocol", "the case report", "the FDA label"),
        ("dosage", "side effects", "survival rate", "eligibility criteria", "follow-up schedule"),
        ("stopped the treatment", "changed the dose", "enrolled in the trial", "was readmitted", "developed resistance"),
        ("all the clinical notes", "the medical literature here", "these guidelines", "the full set of case reports", "the corpus"),
        ("antibiotic resistance", "patient safety", "chronic pain", "preventive care", "mental health"),
        ("treatments", "risk factors", "complications", "diagnoses", "recommendations"),
        ("张医生", "李护士长", "王教授", "陈主任", "刘患者"),
        ("二甲双胍", "心脏二期试验", "仁和医院", "二型糖尿病", "BRCA1基因"),
        ("临床指南", "出院小结", "试验方案", "病例报告", "药品说明书"),
        ("剂量", "副作用", "生存率", "入组标准", "随访安排"),
        ("停止了治疗", "调整了剂量", "加入了试验", "再次入院", "出现了耐药"),
        ("所有病历", "这些医学文献", "这些指南", "全部病例报告", "整个语料库"),
        ("抗生素耐药", "患者安全", "慢性疼痛", "预防保健", "心理健康"),
        ("治疗方案", "危险因素", "并发症", "诊断", "建议"),
    ),
    Domain(
        "law",
        ("Judge Harriet Moss", "Attorney Leo Vance", "the plaintiff Ana Ruiz", "Commissioner Park", "Counsel Ibsen"),
        ("the Halvorsen contract", "the Supreme Court", "Greenfield Holdings", "the merger agreement", "Section 12 of the Act"),
        ("the ruling", "the appeal brief", "the deposition", "the settlement agreement", "the court transcript"),
        ("liability", "damages claim", "legal standing", "defence strategy", "sentencing"),
        ("filed an appeal", "settled out of court", "breached the contract", "dismissed the case", "changed the ruling"),
        ("all the case files", "the whole legal corpus", "these judgments", "the body of contracts", "the collection"),
        ("privacy law", "contract disputes", "due process", "intellectual property", "labour rights"),
        ("legal issues", "precedents", "arguments", "disputes", "obligations"),
        ("孙法官", "周律师", "原告吴芳", "郑检察官", "何顾问"),
        ("华盛合同", "最高人民法院", "绿野控股", "并购协议", "该法第十二条"),
        ("判决书", "上诉状", "证词", "和解协议", "庭审笔录"),
        ("责任", "赔偿请求", "诉讼资格", "辩护策略", "量刑"),
        ("提起了上诉", "庭外和解", "违反了合同", "驳回了起诉", "改判"),
        ("所有案卷", "整个法律语料", "这些判决", "全部合同", "这批文书"),
        ("隐私保护", "合同纠纷", "正当程序", "知识产权", "劳动权益"),
        ("法律问题", "判例", "论点", "争议", "义务"),
    ),
    Domain(
        "science",
        ("Dr. Ingrid Larsen", "Professor Okonkwo", "Dr. Mei Chen", "the Hubble team", "Dr. Pablo Ortega"),
        ("the Kepler-452 system", "graphene", "the Large Hadron Collider", "CRISPR-Cas9", "the Atacama observatory"),
        ("the Nature paper", "the preprint", "the lab notebook", "the grant proposal", "the conference talk"),
        ("methodology", "main finding", "error margin", "sample size", "funding"),
        ("retracted the paper", "replicated the experiment", "changed the hypothesis", "discovered the anomaly", "moved labs"),
        ("all the papers", "the entire research corpus", "these abstracts", "the literature collection", "the dataset"),
        ("climate change", "quantum computing", "reproducibility", "gene editing", "dark matter"),
        ("research directions", "open questions", "methods", "findings", "controversies"),
        ("钱教授", "林博士", "陈梅研究员", "哈勃团队", "欧阳博士"),
        ("开普勒452星系", "石墨烯", "大型强子对撞机", "CRISPR技术", "阿塔卡马天文台"),
        ("那篇自然论文", "预印本", "实验记录", "基金申请书", "会议报告"),
        ("研究方法", "主要发现", "误差范围", "样本量", "经费"),
        ("撤回了论文", "重复了实验", "修改了假设", "发现了异常", "换了实验室"),
        ("所有论文", "整个研究语料", "这些摘要", "这批文献", "这个数据集"),
        ("气候变化", "量子计算", "可重复性", "基因编辑", "暗物质"),
        ("研究方向", "未解问题", "方法", "发现", "争议"),
    ),
    Domain(
        "history",
        ("Napoleon Bonaparte", "Queen Isabella", "General Sherman", "Emperor Meiji", "Catherine the Great"),
        ("the Treaty of Ghent", "the Hanseatic League", "the Siege of Vienna", "the East India Company", "Constantinople"),
        ("the royal chronicle", "the ambassador's diary", "the census records", "the war correspondence", "the parish register"),
        ("foreign policy", "military campaigns", "alliances", "economic reforms", "succession"),
        ("declared war", "signed the treaty", "abdicated", "moved the capital", "raised taxes"),
        ("the whole archive", "all the chronicles", "these historical documents", "the collection of letters", "the corpus"),
        ("colonialism", "trade routes", "religious conflict", "revolution", "state building"),
        ("wars", "reforms", "turning points", "dynasties", "movements"),
        ("康熙", "郑和", "曾国藩", "武则天", "李鸿章"),
        ("南京条约", "丝绸之路", "洋务运动", "东印度公司", "长安城"),
        ("起居注", "使臣日记", "户籍档案", "战时书信", "地方志"),
        ("外交政策", "军事行动", "联盟", "经济改革", "继承问题"),
        ("宣战", "签订了条约", "退位", "迁都", "加税"),
        ("整个档案", "所有史料", "这些历史文献", "这批书信", "这套史书"),
        ("殖民", "贸易路线", "宗教冲突", "革命", "国家建设"),
        ("战争", "改革", "转折点", "王朝", "运动"),
    ),
    Domain(
        "software",
        ("Alice Nguyen", "the maintainer Bob Stein", "Priya Raman", "the SRE team", "Kenji Watanabe"),
        ("the payments service", "PostgreSQL 16", "the auth module", "release 4.2", "the Kafka cluster"),
        ("the incident report", "the design doc", "the changelog", "the pull request", "the runbook"),
        ("error handling", "latency", "API design", "test coverage", "deployment process"),
        ("rolled back the release", "migrated the database", "deprecated the endpoint", "rewrote the cache", "added retries"),
        ("the whole codebase", "all the design docs", "these incident reports", "the repository history", "the wiki"),
        ("technical debt", "security", "performance", "developer experience", "reliability"),
        ("bugs", "architectural decisions", "failure modes", "dependencies", "recurring incidents"),
        ("王工", "李架构师", "张运维", "测试组", "赵前端"),
        ("支付服务", "PostgreSQL 16", "认证模块", "4.2版本", "Kafka集群"),
        ("事故报告", "设计文档", "变更日志", "合并请求", "运维手册"),
        ("错误处理", "延迟", "接口设计", "测试覆盖率", "发布流程"),
        ("回滚了发布", "迁移了数据库", "废弃了接口", "重写了缓存", "加了重试"),
        ("整个代码库", "所有设计文档", "这些事故报告", "仓库历史", "内部维基"),
        ("技术债", "安全", "性能", "开发体验", "可靠性"),
        ("缺陷", "架构决策", "故障模式", "依赖", "反复出现的事故"),
    ),
    Domain(
        "news",
        ("Senator Ruth Calloway", "Mayor Diego Alvarez", "Elon Marsh", "the activist Nia Brooks", "Minister Haldane"),
        ("the Riverside housing bill", "Meridian Bank", "the port strike", "the city council", "the wildfire in Larch County"),
        ("The Daily Ledger", "the Morning Post", "Channel 9 News", "the Reuters wire", "The Harbor Times"),
        ("public statements", "voting record", "response to the crisis", "funding sources", "approval rating"),
        ("resigned", "vetoed the bill", "announced a recount", "cut the budget", "called an emergency meeting"),
        ("all the news articles", "this news corpus", "the whole feed", "these reports", "the collection of stories"),
        ("inflation", "housing", "elections", "public health", "immigration"),
        ("stories", "controversies", "events", "political issues", "recurring topics"),
        ("市长周明", "人大代表何芳", "马先生", "环保人士林娜", "部长韩涛"),
        ("河畔住房法案", "子午银行", "港口罢工", "市议会", "西山山火"),
        ("新京日报", "晨报", "九频道新闻", "新华社电", "海港时报"),
        ("公开表态", "投票记录", "危机应对", "资金来源", "支持率"),
        ("辞职", "否决了法案", "宣布重新计票", "削减了预算", "召开了紧急会议"),
        ("所有新闻报道", "这个新闻语料", "整个信息流", "这些报道", "这批稿件"),
        ("通货膨胀", "住房", "选举", "公共卫生", "移民"),
        ("新闻", "争议", "事件", "政治议题", "反复出现的话题"),
    ),
    Domain(
        "sports",
        ("Marta Silva", "coach Brian Doyle", "Lukas Berger", "the goalkeeper Ade Bello", "Serena Park"),
        ("FC Northgate", "the Olympic final", "the Wimbledon quarter-final", "the Tigers", "the 2023 World Cup"),
        ("the match report", "the post-game interview", "the transfer announcement", "the season preview", "the injury update"),
        ("form", "contract", "injury record", "tactics", "goal tally"),
        ("was transferred", "was sent off", "announced retirement", "changed formation", "won the title"),
        ("all the match reports", "the whole season's coverage", "these sports articles", "the commentary archive", "the corpus"),
        ("fan culture", "doping", "player welfare", "transfers", "coaching"),
        ("rivalries", "storylines", "tactics", "records", "upsets"),
        ("孙杨", "主教练周涛", "李娜", "门将王大雷", "郎平"),
        ("北城足球俱乐部", "奥运会决赛", "温网八强赛", "猛虎队", "2023年世界杯"),
        ("赛事报道", "赛后采访", "转会公告", "赛季前瞻", "伤病通报"),
        ("状态", "合同", "伤病史", "战术", "进球数"),
        ("转会", "被罚下", "宣布退役", "改变了阵型", "夺冠"),
        ("所有赛事报道", "整个赛季的报道", "这些体育文章", "解说档案", "整个语料"),
        ("球迷文化", "兴奋剂", "运动员权益", "转会", "执教"),
        ("对抗", "故事线", "战术", "纪录", "爆冷"),
    ),
    Domain(
        "podcasts",
        ("the host Maya Patel", "guest Tom Richter", "Dr. Lena Voss", "the co-host Sam", "Jordan Reyes"),
        ("episode 42", "the Deep Work series", "the interview with the astronaut", "the listener mailbag", "the season finale"),
        ("the transcript", "the show notes", "the intro segment", "the Q&A part", "the sponsor read"),
        ("views on productivity", "career story", "advice", "favourite books", "predictions"),
        ("changed careers", "launched a startup", "left the show", "wrote a book", "moved abroad"),
        ("all the episodes", "the whole podcast", "these transcripts", "the entire back catalogue", "the show"),
        ("technology and society", "work-life balance", "creativity", "education", "health"),
        ("topics", "recurring ideas", "guest opinions", "debates", "lessons"),
        ("主播小雨", "嘉宾老陈", "李医生", "搭档阿杰", "陈一鸣"),
        ("第42期", "深度工作系列", "宇航员访谈", "听众来信", "季终集"),
        ("文字稿", "节目简介", "开场部分", "问答环节", "广告口播"),
        ("对效率的看法", "职业经历", "建议", "喜欢的书", "预测"),
        ("转行", "创业", "离开了节目", "出了书", "移居海外"),
        ("所有节目", "整个播客", "这些文字稿", "全部往期", "这档节目"),
        ("科技与社会", "工作与生活平衡", "创造力", "教育", "健康"),
        ("话题", "反复出现的观点", "嘉宾观点", "争论", "经验教训"),
    ),
    Domain(
        "finance",
        ("fund manager Clara Wu", "analyst Peter Gray", "CFO Nadia Karim", "Warren Hale", "the trader Ivan Petrov"),
        ("Meridian Capital", "the bond issue", "the Series B round", "the Hang Seng index", "Alder Pension Fund"),
        ("the 10-K filing", "the analyst note", "the prospectus", "the audit report", "the shareholder letter"),
        ("exposure to rates", "revenue guidance", "debt level", "dividend policy", "valuation"),
        ("downgraded the stock", "sold the stake", "restated earnings", "raised capital", "defaulted on the loan"),
        ("all the filings", "the whole financial corpus", "these analyst reports", "the set of earnings calls", "the dataset"),
        ("interest rates", "market volatility", "ESG investing", "credit risk", "fintech"),
        ("risks", "market trends", "investment themes", "warnings", "opportunities"),
        ("基金经理吴晴", "分析师高鹏", "财务总监卡丽", "巴老", "交易员彼得"),
        ("子午资本", "这次债券发行", "B轮融资", "恒生指数", "赤杨养老基金"),
        ("年度报告", "研报", "招股书", "审计报告", "致股东信"),
        ("利率敞口", "收入指引", "负债水平", "分红政策", "估值"),
        ("下调了评级", "出售了股份", "重述了利润", "募集了资金", "贷款违约"),
        ("所有公告", "整个金融语料", "这些研报", "全部业绩会", "这个数据集"),
        ("利率", "市场波动", "ESG投资", "信用风险", "金融科技"),
        ("风险", "市场趋势", "投资主题", "警示", "机会"),
    ),
    Domain(
        "education",
        ("Principal Ortiz", "Ms. Abernathy", "the student Leo Kim", "Professor Sato", "Dean Whitcombe"),
        ("Hillcrest Academy", "the maths curriculum", "the exchange programme", "the science fair", "Room 204"),
        ("the school report", "the inspection report", "the syllabus", "the parent newsletter", "the exam review"),
        ("teaching style", "grades", "attendance", "budget", "curriculum changes"),
        ("changed the syllabus", "was suspended", "won the scholarship", "closed the library", "hired new teachers"),
        ("all the school documents", "the whole set of reports", "these lesson plans", "the archive", "the corpus"),
        ("remote learning", "inclusion", "assessment", "teacher workload", "student wellbeing"),
        ("challenges", "policies", "teaching methods", "concerns", "improvements"),
        ("王校长", "李老师", "学生小明", "佐藤教授", "教务主任"),
        ("育英中学", "数学课程", "交换项目", "科技节", "204教室"),
        ("学校报告", "督导报告", "教学大纲", "家长通讯", "考试分析"),
        ("教学风格", "成绩", "出勤", "预算", "课程改革"),
        ("修改了大纲", "被停课", "获得了奖学金", "关闭了图书馆", "招聘了新老师"),
        ("所有学校文件", "全部报告", "这些教案", "这份档案", "整个语料"),
        ("在线教学", "融合教育", "考评", "教师负担", "学生身心健康"),
        ("挑战", "政策", "教学方法", "关切", "改进"),
    ),
    Domain(
        "environment",
        ("Dr. Rosa Jimenez", "the ranger Tom Haskins", "Greenwatch", "Minister Lindqvist", "the farmer Ali Demir"),
        ("the Amazon basin", "the Kyoto Protocol", "Lake Victoria", "the coal plant at Redfield", "the coral reef survey"),
        ("the impact assessment", "the field notes", "the IPCC chapter", "the monitoring report", "the NGO brief"),
        ("emissions", "water quality", "species count", "restoration plan", "land use"),
        ("banned logging", "expanded the reserve", "missed the target", "shut the plant", "reintroduced wolves"),
        ("all the environmental reports", "the whole dataset", "these field studies", "the monitoring archive", "the corpus"),
        ("biodiversity loss", "renewable energy", "pollution", "drought", "conservation"),
        ("threats", "trends", "policies", "impacts", "solutions"),
        ("赵博士", "护林员老韩", "绿色观察", "环境部长", "农民阿里"),
        ("亚马孙流域", "京都议定书", "洞庭湖", "红田燃煤电厂", "珊瑚礁调查"),
        ("环评报告", "野外记录", "IPCC章节", "监测报告", "环保组织简报"),
        ("排放", "水质", "物种数量", "修复计划", "土地利用"),
        ("禁止了砍伐", "扩大了保护区", "没有达标", "关停了电厂", "重新引入了狼"),
        ("所有环境报告", "整个数据集", "这些野外研究", "监测档案", "整个语料"),
        ("生物多样性丧失", "可再生能源", "污染", "干旱", "自然保护"),
        ("威胁", "趋势", "政策", "影响", "解决方案"),
    ),
    Domain(
        "technology",
        ("Satya Rao", "the founder Lin Hart", "engineer Omar Farouk", "Grace Hopper Lab", "Ada Moreau"),
        ("the Nimbus phone", "OpenGrid", "the X2 chip", "the smart-glasses launch", "the TechNova conference"),
        ("the product review", "the keynote", "the teardown", "the spec sheet", "the launch blog post"),
        ("battery life", "privacy policy", "pricing", "market reception", "design choices"),
        ("delayed the launch", "open-sourced the model", "recalled the device", "cut the price", "partnered with a carmaker"),
        ("all the tech articles", "the whole review corpus", "these product pages", "the blog archive", "the dataset"),
        ("artificial intelligence", "privacy", "consumer hardware", "platform competition", "regulation of tech"),
        ("trends", "product launches", "concerns", "innovations", "debates"),
        ("饶总", "创始人林哈特", "工程师欧马", "格蕾丝实验室", "莫艾达"),
        ("云雀手机", "开放网格", "X2芯片", "智能眼镜发布会", "科创大会"),
        ("评测", "主题演讲", "拆解报告", "规格表", "发布博客"),
        ("续航", "隐私政策", "定价", "市场反响", "设计取舍"),
        ("推迟了发布", "开源了模型", "召回了设备", "降价", "与车企合作"),
        ("所有科技文章", "整个评测语料", "这些产品页", "博客档案", "这个数据集"),
        ("人工智能", "隐私", "消费电子", "平台竞争", "科技监管"),
        ("趋势", "新品发布", "担忧", "创新", "争论"),
    ),
)

# ---------------------------------------------------------------------------------------------------------
# Templates. Slots: {p} {p2} {p3} people, {t} {t2} things, {s} {s2} sources, {a} aspect, {act} {act2} actions,
# {c} corpus, {topic}, {k} kinds, {d1} {d2} dates. Each class has templates of several shapes.
# ---------------------------------------------------------------------------------------------------------

EN_LOCAL = (
    "Who is {p}?",
    "What is {p}'s role in {t}?",
    "Where is {t} located?",
    "When did {p} first appear in {s}?",
    "What does {s} say about {p}'s {a}?",
    "Tell me about {t}.",
    "Describe {p}.",
    "What is {t} known for?",
    "Which {a} does {p} have, according to {s}?",
    "Is {p} connected to {t}?",
    "Did {p} work for {t}?",
    "What is the {a} of {t}?",
    "List the people who work with {p}.",
    "Give the details of {p}'s {a}.",
    "Who leads {t}?",
    "How many people are involved in {t}?",
    "What title does {p} hold?",
    "In {s}, what is {t} described as?",
    "According to {s}, what did {p} do?",
    "What year did {p} join {t}?",
    "Which organisation is {p} associated with?",
    "who is {p} exactly",
    "{p} - what is their {a}?",
    "Remind me what {t} is.",
    "Quick question: what was {p}'s {a}?",
    "Who is the person that {act}, was mentioned in {s}, and is linked to {t}?",
    "Which organisation, described in {s} as having {act}, was also reported by {s2} to be linked to {p}?",
    "Who, according to both {s} and {s2}, {act} and is associated with {t}?",
    "Considering {s} and {s2}, which person tied to {t} {act}?",
    "What did {p} say in {s}?",
    "Name the place where {p} {act}.",
    "What is the exact {a} mentioned for {t}?",
    "Can you find {p}'s {a} in the documents?",
    "I need the {a} of {t}.",
    "Does {t} belong to {p}?",
    "Which organisation, reported by {s} to have {act} and by {s2} to be tied to {p}, is involved with {t}?",
    "Considering the information from {s} about {t} and {s2} about {t2}, which person {act}?",
    "Who is the individual that {act}, is associated with {t} according to {s}, and was later mentioned by {s2} "
    "in connection with {t2}?",
    "Based on {s} and {s2}, which person both {act} and {act2}?",
    "Which of {p}'s associates {act}?",
    "In the part of {s} where {p} {act}, what does {p2} give to {p}?",
    "While {p} was at {t}, whom did {p} meet?",
    "According to the section discussing {a}, how does {s} describe {t}?",
    "What was the name of the person who {act} at {t}?",
    "Which individual, described in {s} as having {act}, is now accused by {p} of wrongdoing?",
    "Who, mentioned in both {s} and {s2}, {act} after joining {t}?",
    "With whom did {p} correspond while at {t}?",
    "What kind of {a} does {t} have, as stated in {s}?",
    "What is {t} used for?",
    "Which {a} is reported for {t}?",
    "What is the first step listed for {t} in {s}?",
    "Where did {p} keep the records about {t}?",
    "Which person, featured in both {s} and {s2}, {act} and later {act2}?",
    "Who is the figure that {s} credits with having {act}, whom {s2} links to {t}, and who also {act2}?",
    "Considering what {s} says about {t} and what {s2} says about {p}, which organisation {act}?",
    "Which single entity, discussed in {s} in connection with {t} and in {s2} in connection with {t2}, {act}?",
    "Who is the person who, according to {s}, {act}, and who, as {s2} later reported, {act2}?",
    "Which organisation, having {act} and then {act2}, is the one that {s} links to {p}?",
    "What is the name of the place where {p} {act}, which {s} describes in detail and {s2} mentions briefly?",
    "Considering both {s} and {s2}, who is the person tied to {t} and {t2} who {act}?",
    "According to {s}, which person {act}, was praised by {p}, and is now associated with {t}?",
)

EN_GLOBAL = (
    "What are the main themes in {c}?",
    "Summarize {c}.",
    "Give me an overview of {c}.",
    "What are the top {k} across {c}?",
    "What is {c} mostly about?",
    "Which {k} come up most often in {c}?",
    "Overall, what are the key {k} in {c}?",
    "What patterns emerge across {c}?",
    "Across all the documents, what are the recurring {k}?",
    "What are the key takeaways from {c}?",
    "In general, what does {c} say about {topic}?",
    "How is {topic} portrayed across {c}?",
    "What are the biggest {k} highlighted throughout {c}?",
    "Which {k} are discussed the most in {c}?",
    "What are the least discussed {k} in {c}?",
    "List the major {k} in {c}.",
    "Describe the dominant {k} in {c}.",
    "What trends can you see across {c}?",
    "What does {c} reveal about {topic} as a whole?",
    "If you had to summarise {c} in a few sentences, what would you say?",
    "What are the most important {k} overall?",
    "What are the common threads running through {c}?",
    "Which {k} appear again and again in {c}?",
    "what's the big picture of {c}",
    "Can you give a high-level summary of everything in {c}?",
    "How would you characterise the {k} in {c} in general?",
    "What broad {k} does {c} cover?",
    "What are the overarching ideas about {topic} in {c}?",
    "Rank the most frequent {k} in {c}.",
    "What does the collection as a whole tell us about {topic}?",
    "What are the key {k} across the entire dataset?",
    "Looking at everything, what stands out about {topic}?",
    "Which {k} dominate {c}, and which are rare?",
    "Summarise the main {k} across all sources.",
    "What are the general trends in {topic} across the corpus?",
)

EN_DRIFT = (
    "How did {p} affect {t}?",
    "What is the relationship between {p} and {p2}?",
    "Compare {p} and {p2} in terms of {a}.",
    "How does {t} differ from {t2}?",
    "Why did {p} {act_base}?",
    "How did {p}'s {a} change after {p2} {act}?",
    "What led {p} to {act_base}, and how did {t} respond?",
    "What happened to {t} after {p} {act}?",
    "How is {p} connected to {t2} through {p2}?",
    "How are {p} and {t} related?",
    "Explain how {p} influenced {p2}.",
    "What were the consequences of {p}'s decision to {act_base} for {t}?",
    "Rewrite the events involving {p} and {p2} as a news report.",
    "From {p}'s point of view, describe the conflict with {p2} over {t}.",
    "Summarize the interactions between {p}, {p2} and {t}.",
    "How does {s} portray the relationship between {p} and {t}?",
    "In what ways did {p} and {p2} work together on {t}?",
    "If {p} had not {act}, how might {t} have been affected?",
    "Which came first: {p} {act} or {p2} {act2}, and how are the two linked?",
    "What chain of events connects {p} to {t2}?",
    "Does {s} suggest that {p} {act}, while {s2} reports that {p2} {act2}?",
    "Between the {s} published on {d1} and the {s2} published on {d2}, did the account of {p}'s {a} change?",
    "Did {s} and {s2} describe {t}'s {a} consistently?",
    "Was {p}'s {a} portrayed differently in {s} than in {s2}?",
    "How did the situation at {t} evolve from {d1} to {d2}?",
    "What role did {p} play in {p2}'s decision, and why?",
    "Trace the timeline of {p}'s involvement with {t}.",
    "What are the similarities and differences between {t} and {t2}?",
    "How did {t} and {t2} both contribute to {p}'s {a}?",
    "Why is {p}'s {a} important for understanding {t}?",
    "What caused the tension between {p} and {t}?",
    "Which had a bigger impact on {t}: {p} or {p2}?",
    "How do {p}'s actions in {s} explain what later happened to {t2}?",
    "Write a short letter from {p} to {p2} about {t}.",
    "What is the role and significance of {t} in relation to {p} and {p2}?",
    "After {p} {act}, what did {p2} do, and what was the effect on {t}?",
    "What are the {k} and the {a} associated with {t}, and how do they relate?",
    "How is {t} handled once {p} has {act}?",
    "Which factors connect {t} and {t2}, and why do they matter?",
    "How does {s} describe the interplay between {p}, {p2} and {t}?",
    "What interactions did {p} have with {p2} and {p3} over the course of {s}?",
    "What do {t} and {t2} have in common?",
    "Explain the steps that led from {p}'s {a} to the outcome at {t}.",
    "Was there a change in how {s} reported {p}'s {a} between {d1} and {d2}?",
    "Does {s} agree with {s2} that {p} {act}?",
    "Is the account of {t} in {s} consistent with the one in {s2}?",
    "Did {p} {act_base} before or after {p2} {act}?",
    "Following the {s} of {d1}, did the {s2} of {d2} report a different {a} for {t}?",
    "Imagine you are {p}: write a memo to {p2} explaining what happened at {t}.",
    "How do {p}'s {a} and {p2}'s {a} shape what happens to {t}?",
    "In what order did {p} {act_base}, {p2} {act2}, and {t} change, and why?",
    "How is {t} dealt with over time, from the first signs to the follow-up?",
    "What is the role of {t} in {p}'s {a}?",
    "Which {k} are needed to handle {t}, and why?",
    "How are {t} and {a} used together throughout {s}?",
    "How does {s} portray the way {p} deals with {t}?",
    "What steps are involved in handling {t}, and how do they depend on its {a}?",
    "In what ways does {t} shape {p}'s {a}?",
    "What does {p}'s handling of {t} reveal about {p}'s character?",
    "How are the events at {t} tied to {p}'s later {a}?",
    "How is the {a} of {t} assessed, and what follows from the result?",
)

ZH_LOCAL = (
    "{p}是谁？",
    "{p}在{t}中担任什么角色？",
    "{t}位于哪里？",
    "{s}里关于{p}的{a}是怎么说的？",
    "介绍一下{t}。",
    "{t}以什么闻名？",
    "{p}的{a}是什么？",
    "{p}和{t}有关系吗？",
    "{p}在{t}工作过吗？",
    "{t}的负责人是谁？",
    "根据{s}，{p}做了什么？",
    "{p}是哪一年加入{t}的？",
    "请列出与{p}共事的人。",
    "{p}是什么身份？",
    "{t}的{a}是多少？",
    "{s}中{t}被描述成什么？",
    "请问{p}属于哪个组织？",
    "{p}在哪里{act}？",
    "哪个人{act}，在{s}中被提到，并且与{t}有关？",
    "根据{s}和{s2}，与{t}有关且{act}的是谁？",
    "{p}的具体{a}是什么？",
    "帮我查一下{t}的{a}。",
    "{p}说过关于{t}的什么话？",
    "{t}是属于{p}的吗？",
    "简单说说{p}这个人。",
    "根据{s}和{s2}的报道，哪个机构既{act}又与{p}有关？",
    "综合{s}关于{t}的内容和{s2}关于{t2}的内容，是哪个人{act}？",
    "在{s}里{p}{act}的那一段，{p2}给了{p}什么？",
    "{p}在{t}期间和谁有书信往来？",
    "{s}和{s2}都提到的、在加入{t}后{act}的人是谁？",
    "综合{s}对{t}的描述和{s2}对{p}的描述，是哪个组织{act}？",
    "据{s}报道曾{act}、后来又被{s2}报道{act2}的那个人是谁？",
)

ZH_GLOBAL = (
    "{c}的主要主题是什么？",
    "请概括{c}。",
    "总体来看，{c}讲了什么？",
    "{c}中最常见的{k}有哪些？",
    "{c}整体上反映了哪些{k}？",
    "所有文档中反复出现的{k}是什么？",
    "{c}中关于{topic}的总体趋势是什么？",
    "请总结{c}的核心要点。",
    "{c}里讨论最多的{k}是什么？",
    "从整体上看，{topic}在{c}中是如何呈现的？",
    "{c}有哪些主要的{k}？",
    "请给出{c}的概览。",
    "整个数据集中最重要的{k}有哪些？",
    "{c}揭示了哪些关于{topic}的规律？",
    "用几句话概括一下{c}。",
    "{c}中哪些{k}出现得最少？",
    "纵观{c}，有哪些共同的{k}？",
    "{c}大体上在讲什么？",
    "所有资料里，{topic}方面的主要趋势有哪些？",
    "列出{c}中的主要{k}。",
    "{c}的整体基调是怎样的？",
    "归纳一下{c}里的关键{k}。",
    "全部材料中，哪些{k}最突出？",
    "{c}总的来说有哪些值得注意的{k}？",
    "整体而言，{c}对{topic}持什么态度？",
)

ZH_DRIFT = (
    "{p}是如何影响{t}的？",
    "{p}和{p2}之间是什么关系？",
    "比较{p}和{p2}在{a}上的区别。",
    "{t}和{t2}有什么不同？",
    "{p}为什么{act}？",
    "{p2}{act}之后，{p}的{a}发生了什么变化？",
    "是什么导致{p}{act}，{t}又是如何应对的？",
    "{p}{act}之后，{t}发生了什么？",
    "{p}是如何通过{p2}与{t2}联系起来的？",
    "{p}与{t}之间有什么联系？",
    "请解释{p}对{p2}的影响。",
    "{p}{act}对{t}造成了什么后果？",
    "把{p}和{p2}之间发生的事改写成一篇新闻报道。",
    "以{p}的视角，讲述与{p2}在{t}问题上的冲突。",
    "总结{p}、{p2}和{t}之间的互动。",
    "{s}是如何描写{p}与{t}的关系的？",
    "如果{p}没有{act}，{t}会受到什么影响？",
    "{s}认为{p}{act}，而{s2}却说{p2}{act2}，两者是否矛盾？",
    "从{d1}的{s}到{d2}的{s2}，对{p}{a}的描述有变化吗？",
    "{s}和{s2}对{t}{a}的报道是否一致？",
    "{t}的情况从{d1}到{d2}是如何演变的？",
    "梳理{p}参与{t}的时间线。",
    "{t}和{t2}有哪些异同？",
    "{p}和{p2}谁对{t}的影响更大？",
    "{t}在{p}和{p2}的关系中起了什么作用？",
    "先是{p}{act}，然后{p2}{act2}，这两件事之间有什么因果关系？",
    "{s}是否同意{s2}关于{p}{act}的说法？",
    "{p}是在{p2}{act2}之前还是之后{act}的？",
    "{t}和{t2}有什么共同点？",
    "{p}、{p2}和{p3}在{s}中有哪些往来？",
    "与{t}相关的{k}和{a}分别是什么，它们之间有何联系？",
    "{t}从最初出现到后续跟进是如何处理的？",
    "处理{t}需要哪些{k}，为什么？",
    "{t}如何塑造了{p}的{a}？",
)

EN_DATES = ("March 3, 2023", "October 12, 2023", "June 2021", "the spring of 1854", "last January", "November 28, 2023")
ZH_DATES = ("2023年3月3日", "2023年10月", "2021年6月", "1854年春", "去年一月", "2023年11月28日")


def _base_verb(action: str) -> str:
    """Turn a past-tense phrase into its base form for 'Why did X ...' templates (good enough for our fillers)."""
    irregular = {"left": "leave", "broke": "break", "won": "win", "sold": "sell", "hid": "hide", "was": "be",
                 "rewrote": "rewrite", "cut": "cut", "shut": "shut", "wrote": "write", "burned": "burn"}
    head, _, rest = action.partition(" ")
    if head in irregular:
        base = irregular[head]
    elif head.endswith("ied"):
        base = head[:-3] + "y"
    elif head.endswith(("ped", "ged")) and len(head) > 4 and head[-3] == head[-4]:
        base = head[:-3]
    elif head.endswith("ed") and head[:-2].endswith(("at", "os", "ac", "ng", "ov", "ir", "as", "ct", "uc", "tl")):
        base = head[:-1]
    elif head.endswith("ed"):
        base = head[:-2]
    else:
        base = head
    return f"{base} {rest}".strip()


def _fill(template: str, dom: Domain, lang: str, rng: random.Random) -> tuple[str, list[str]]:
    zh = lang == "zh"
    people = list(dom.zh_people if zh else dom.people)
    things = list(dom.zh_things if zh else dom.things)
    sources = list(dom.zh_sources if zh else dom.sources)
    actions = list(dom.zh_actions if zh else dom.actions)
    rng.shuffle(people)
    rng.shuffle(things)
    rng.shuffle(sources)
    rng.shuffle(actions)
    dates = list(ZH_DATES if zh else EN_DATES)
    rng.shuffle(dates)
    d1, d2 = sorted(dates[:2], key=dates.index)
    values = {
        "p": people[0], "p2": people[1], "p3": people[2],
        "t": things[0], "t2": things[1],
        "s": sources[0], "s2": sources[1],
        "a": rng.choice(dom.zh_aspects if zh else dom.aspects),
        "act": actions[0], "act2": actions[1], "act_base": _base_verb(actions[0]),
        "c": rng.choice(dom.zh_corpus if zh else dom.corpus),
        "topic": rng.choice(dom.zh_topics if zh else dom.topics),
        "k": rng.choice(dom.zh_kinds if zh else dom.kinds),
        "d1": d1, "d2": d2,
    }
    text = template.format(**values)
    entities = [values[key] for key in ("p", "p2", "p3", "t", "t2") if "{" + key + "}" in template]
    text = text[0].upper() + text[1:] if not zh else text
    return text, entities


def generate(rng: random.Random) -> list[dict[str, object]]:
    """Expand every template over several domains (each template gets a different domain sample)."""
    rows: list[dict[str, object]] = []
    plan = (
        ("local", "en", EN_LOCAL, 11), ("global", "en", EN_GLOBAL, 10), ("drift", "en", EN_DRIFT, 10),
        ("local", "zh", ZH_LOCAL, 6), ("global", "zh", ZH_GLOBAL, 6), ("drift", "zh", ZH_DRIFT, 6),
    )
    for label, lang, templates, per_template in plan:
        for template in templates:
            for dom in rng.sample(DOMAINS, per_template):
                text, entities = _fill(template, dom, lang, rng)
                rows.append({"question": text, "label": label, "lang": lang, "domain": dom.name,
                             "source": "graphroute", "origin": "template", "entities": entities})
    return rows


def load_handwritten(path: Path = HANDWRITTEN) -> list[dict[str, object]]:
    rows = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                row.setdefault("source", "graphroute")
                row.setdefault("origin", "handwritten")
                row.setdefault("entities", [])
                rows.append(row)
    return rows


def build() -> list[dict[str, object]]:
    rng = random.Random(SEED)
    rows = load_handwritten() + generate(rng)
    seen: set[str] = set()
    unique = []
    for row in rows:
        key = " ".join(str(row["question"]).lower().split())
        if key not in seen:
            seen.add(key)
            unique.append(row)
    return unique


def main() -> None:
    rows = build()
    with OUTPUT.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    counts: dict[tuple[str, str], int] = {}
    for row in rows:
        key = (str(row["label"]), str(row["lang"]))
        counts[key] = counts.get(key, 0) + 1
    print(f"wrote {len(rows)} questions to {OUTPUT}: {dict(sorted(counts.items()))}")


if __name__ == "__main__":
    main()
