"""Word lists the offline extractor uses: stop words, honorifics and the cue words that guess entity types."""

from __future__ import annotations

from shared_context.text import STOPWORDS as _FUNCTION_WORDS


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Function words (the shared stopword list) and frequent sentence starters: never an entity on their own,
# stripped from span edges.
STOPWORDS = _FUNCTION_WORDS | _words("""
a about above across after afterwards again against ago all almost alone along already also although always am
among an and another any anybody anyone anything anyway anywhere are around as at back be became because become
been before beforehand behind being below beside besides between beyond both but by can cannot could did do does
doing done down during each either else elsewhere enough even ever every everyone everything everywhere except few
first for former formerly from further had has have having he hence her here hereafter hers herself him himself his
how however i if in indeed instead into is it its itself just last later latter least less let like many may me
meanwhile might mine more moreover most mostly much must my myself namely neither never nevertheless next no nobody
none nor not nothing now nowhere of off often on once one only onto or other others otherwise our ours ourselves out
over own per perhaps please quite rather really same seem seemed seeming seems several she should since so some
somehow someone something sometime sometimes somewhere still such than that the their theirs them themselves then
thence there thereafter thereby therefore therein these they this those though through throughout thus to together
too toward towards under unless until up upon us very via was we well were what whatever when whence whenever where
whereas wherever whether which while whither who whoever whole whom whose why will with within without would yet you
your yours yourself yourselves yes oh ah alas dear o nay aye sir madam mr mrs ms miss dr
second third fourth fifth sixth seventh eighth ninth tenth finally firstly secondly lastly
today tomorrow yesterday tonight morning evening afternoon night day days week weeks month months year years
monday tuesday wednesday thursday friday saturday sunday january february march april june july august september
october november december spring summer autumn winter
chapter book part volume contents preface index illustration illustrations footnote footnotes note notes appendix
introduction section page pages figure table end finis epilogue prologue
new old good great little long small big high low young own other such same last next best better
see saw seen said says say asked told replied answered cried thought went came made took saw knew got gave found looked seemed
many much more most some any each every all both few several
mother father brother sister son daughter husband wife uncle aunt friend friends man men woman women boy girl child
children people lady gentleman gentlemen lord god heaven
""")

# Honorifics dropped from a name (so "Dr. Amara Osei" and "Amara Osei" merge) but counted as a PERSON cue.
HONORIFICS = _words("mr mrs ms miss dr prof professor mx")
# Titles kept in the name ("King George") and counted as a PERSON cue.
PERSON_TITLES = _words("""sir lady lord king queen prince princess duke duchess earl count countess baron baroness captain capt
colonel col general major lieutenant sergeant admiral chief president senator governor mayor minister director
father mother sister brother saint bishop cardinal pope rev reverend judge doctor aunt uncle madame monsieur herr
""")
ABBREVIATIONS = _words("mr mrs ms dr prof st mt jr sr vs etc no inc ltd co corp dept gen col capt lt sgt rev fig vol ch pp ed est approx")
# Lowercase words allowed inside a capitalised name ("Bank of England", "Leonardo da Vinci").
CONNECTORS = _words("of the de del della da di du van von la le den der y for")

ORG_WORDS = _words("""cooperative co-operative coop co-op institute institution company corporation corp inc ltd llc plc gmbh
council agency university college school academy bank ministry board association society group foundation trust
committee commission department authority club party church union federation league partners partnership
consortium laboratory lab labs centre center office bureau service services systems industries energy power
network alliance fund press times gazette journal navy army regiment court parliament congress government
hospital museum library observatory team project programme program initiative insurance mutual
engineering ombudsman firm firms ltd. holdings trust""")
GEO_WORDS = _words("""river lake mount mountain mountains valley bay island islands isle street road lane avenue square city town
village county province state country kingdom republic harbour harbor port sea ocean hill hills park bridge coast
fjord forest wood woods desert plain plains peninsula cape strait gulf canal estuary shore beach head point
district region north south east west northern southern eastern western castle abbey hall house manor farm station
quay dock pier wharf moor heath sound channel substation shipyard yard""")
EVENT_WORDS = _words("""flood floods storm storms war wars battle festival conference summit strike fire election launch crisis meeting
ceremony expo treaty accord revolution rebellion outbreak earthquake drought collapse blackout outage trial
hearing audit inquiry review referendum celebration anniversary opening closure merger acquisition expedition
voyage campaign tour cyclone hurricane typhoon tsunami landslide""")
PERSON_VERBS = _words("""said says asked told replied answered explained cried exclaimed whispered shouted smiled laughed nodded
thought wrote writes joined joins leads led founded resigned argued insisted admitted added continued
remarked observed sighed""")
GEO_PREPOSITIONS = _words("in at from near to into across towards toward through around outside inside")
# Words that make a poor first or last word of a lowercase noun phrase.
PHRASE_STOP = STOPWORDS | _words("""also make makes making take takes taking get gets getting give gives given going come comes coming see sees
seen know knows known think thinks want wants use used uses using look looks like likes way ways thing things
time times lot lots kind sort part parts place places side sides whole half nothing something anything everything
one two three four five six seven eight nine ten hundred thousand million first second third""")
# Words that make a capitalised multi-word span a thing rather than a person's name.
NON_PERSON_WORDS = _words("""array turbine turbines wind tidal solar farm battery plant grid scheme plan strategy report summit review
    agreement fund bond network microgrid programme project energy power marine""")
ROMAN_NUMERAL = r"^(?=[MDCLXVI])M*(C[MD]|D?C{0,3})(X[CL]|L?X{0,3})(I[XV]|V?I{0,3})$"

# Chinese: jieba part-of-speech flag -> entity type, and suffix cues.
ZH_FLAG_TYPES = {"nr": "PERSON", "nrfg": "PERSON", "nrt": "PERSON", "ns": "GEO", "nt": "ORGANIZATION", "nz": "CONCEPT"}
ZH_ORG_SUFFIXES = ("公司", "合作社", "研究所", "研究院", "大学", "学院", "银行", "协会", "集团", "委员会", "中心", "政府", "部", "局", "基金会", "实验室")
ZH_GEO_SUFFIXES = ("市", "省", "县", "镇", "村", "河", "湖", "山", "港", "岛", "湾", "海", "州", "区")
ZH_EVENT_SUFFIXES = ("洪水", "地震", "会议", "风暴", "台风", "节", "峰会", "危机", "事故", "仪式", "展览会")
ZH_STOP = _words("我们 他们 你们 这个 那个 什么 时候 今天 明天 昨天 今年 去年 明年 方面 问题 情况 工作 时间 人们 大家")
