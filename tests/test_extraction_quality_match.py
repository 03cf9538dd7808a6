"""The extraction benchmark's name matching: case, possessives, articles, honorifics and plurals fold alike."""

from __future__ import annotations

from benchmarks.extraction_quality import fold, prf


def test_fold_matches_plural_and_singular_heads_the_same_way() -> None:
    pairs = [("Ghosts", "GHOST"), ("the Churches", "church"), ("Parties", "PARTY"), ("workhouses", "Workhouse"),
             ("Scrooge's nephew", "SCROOGE NEPHEW"), ("Mr. Fezziwig", "FEZZIWIG"), ("boxes", "BOX")]
    for a, b in pairs:
        assert fold(a) == fold(b), (a, b)
    for word in ("GLASS", "BUS", "ANALYSIS", "SUN"):  # not plurals: left as they are
        assert fold(word) == word
    assert fold("Bob Cratchit") != fold("Cratchit")


def test_prf_counts_the_folded_sets() -> None:
    gold = {fold(t) for t in ("ROOMS", "GHOST", "TINY TIM")}
    found = {fold(t) for t in ("room", "Ghosts", "door")}
    p, r, f1, hit = prf(found, gold)
    assert hit == 2 and round(p, 3) == 0.667 and round(r, 3) == 0.667 and round(f1, 3) == 0.667


def test_alias_credit_only_for_a_short_name_of_exactly_one_full_person_name() -> None:
    from benchmarks.extraction_quality import alias_credits

    people = ["JACOB MARLEY", "TINY TIM", "TIM CRATCHIT", "ADA"]
    missed = {"MARLEY", "JACOB", "TIM", "CRATCHIT FAMILY", "ADA"}
    assert alias_credits(people, missed) == {"MARLEY", "JACOB"}  # TIM has two owners; ADA is no full name


def test_top20_judge_credits_each_reader_entry_once_and_a_shared_name_to_the_next_free_entry() -> None:
    from benchmarks.extraction_quality import judge_top

    entries = ["EBENEZER SCROOGE|SCROOGE", "BOB CRATCHIT|CRATCHIT", "MRS CRATCHIT", "LONDON"]
    judged = judge_top(["SCROOGE", "EBENEZER SCROOGE", "BOB CRATCHIT", "CRATCHIT", "Cratchits", "MAN"], entries)
    assert judged == [("SCROOGE", "EBENEZER SCROOGE"), ("EBENEZER SCROOGE", ""),  # an unmerged alias: a miss
                      ("BOB CRATCHIT", "BOB CRATCHIT"), ("CRATCHIT", "MRS CRATCHIT"),  # "MRS" folds away
                      ("Cratchits", ""), ("MAN", "")]
