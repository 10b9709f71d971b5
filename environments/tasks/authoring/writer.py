"""LibreOffice Writer tasks: formatting, styles, find and replace, editing and writing documents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from environments.tasks.authoring.common import (
    click, download, execute, gold, key, launch, lines, open_, sleep, task, type_, vm_file, wait,
)

DOMAIN = "libreoffice_writer"
APPS = ["libreoffice_writer"]
SAVE = [key("ctrl", "s"), wait(2.0)]
START = [wait(1.0), key("ctrl", "Home")]


def _docx(path: Path, paragraphs: list[str]) -> None:
    import docx

    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    document.save(path)


def _open(asset: str) -> list[dict[str, Any]]:
    return [download((asset, f"~/{asset}")), open_(f"~/{asset}")]


def _same_text(asset: str, gold_asset: str) -> dict[str, Any]:
    return {"func": "compare_docx_files", "result": vm_file(f"~/{asset}", asset), "expected": gold(gold_asset)}


def _checked(asset: str, gold_asset: str, rules: dict[str, Any]) -> dict[str, Any]:
    """Same text as the gold file AND the formatting rules hold."""
    return {
        "func": ["compare_docx_files", "check_document"],
        "conj": "and",
        "result": [vm_file(f"~/{asset}", asset), vm_file(f"~/{asset}", f"again_{asset}")],
        "expected": [gold(gold_asset), {"type": "rule", "rules": rules}],
    }


def _find_replace(find: str, replace: str) -> list[dict[str, Any]]:
    """Edit > Find and Replace (Ctrl+H): type both strings, Replace All, Close (dialog centred on 1280x800)."""
    return [key("ctrl", "h"), wait(1.5), type_(find), click(668, 315), type_(replace), click(858, 361), wait(1.0),
            click(869, 570), wait(0.5)]


def tasks(assets: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    report = ["Quarterly Report", "Revenue grew by twelve percent compared with the previous quarter.",
              "Costs stayed flat thanks to the new supplier contracts.", "The outlook for next quarter is stable."]
    _docx(assets / "quarterly_report.docx", report)
    out.append(task(
        "writer-bold-title", DOMAIN,
        "Make the title line 'Quarterly Report' in quarterly_report.docx bold and save the document (keep the "
        "Word format).",
        APPS, _open("quarterly_report.docx"),
        _checked("quarterly_report.docx", "quarterly_report.docx",
                 {"paragraphs": [{"text": "Quarterly Report", "bold": True},
                                 {"match": "^Revenue grew", "bold": False}]}),
        [*START, key("shift", "End"), key("ctrl", "b"), *SAVE],
    ))

    overview = ["Project Overview", "This document describes the goals of the migration project.",
                "The work is split into three phases over six months."]
    _docx(assets / "project_overview.docx", overview)
    out.append(task(
        "writer-heading-style", DOMAIN,
        "Apply the 'Heading 1' paragraph style to the first line of project_overview.docx and save it.",
        APPS, _open("project_overview.docx"),
        _checked("project_overview.docx", "project_overview.docx",
                 {"paragraphs": [{"text": "Project Overview", "style": "Heading 1"}]}),
        [*START, key("ctrl", "1"), *SAVE],
    ))

    invitation = ["Annual Garden Party", "Join us on Saturday afternoon in the community garden.",
                  "Please bring a dish to share."]
    _docx(assets / "invitation.docx", invitation)
    out.append(task(
        "writer-center-title", DOMAIN,
        "Center the first line (the title) of invitation.docx and save the document.",
        APPS, _open("invitation.docx"),
        _checked("invitation.docx", "invitation.docx",
                 {"paragraphs": [{"text": "Annual Garden Party", "alignment": "center"},
                                 {"match": "^Join us", "alignment": "left"}]}),
        [*START, key("ctrl", "e"), *SAVE],
    ))

    style_guide = ["Style Guide", "The colour palette uses three primary colours.",
                   "Choose a background colour with enough contrast.", "Avoid mixing more than two accent colours."]
    _docx(assets / "style_guide.docx", style_guide)
    _docx(assets / "style_guide_gold.docx", [p.replace("colour", "color") for p in style_guide])
    out.append(task(
        "writer-replace-spelling", DOMAIN,
        "Replace every occurrence of the British spelling 'colour' with 'color' in style_guide.docx (including "
        "inside 'colours') and save the document.",
        APPS, _open("style_guide.docx"), _same_text("style_guide.docx", "style_guide_gold.docx"),
        [wait(1.0), *_find_replace("colour", "color"), *SAVE],
    ))

    minutes = ["Team Sync Minutes", "We reviewed the release checklist.", "Two bugs remain open."]
    closing = "The next sync is on Thursday at ten."
    _docx(assets / "team_minutes.docx", minutes)
    _docx(assets / "team_minutes_gold.docx", minutes + [closing])
    out.append(task(
        "writer-append-paragraph", DOMAIN,
        f"Add a new last paragraph to team_minutes.docx with the text: {closing} Then save the document.",
        APPS, _open("team_minutes.docx"), _same_text("team_minutes.docx", "team_minutes_gold.docx"),
        [wait(1.0), key("ctrl", "End"), key("Return"), type_(closing), *SAVE],
    ))

    memo = ["Office Memo", "DRAFT - internal only, remove before sending.", "The office will be closed on Monday.",
            "Please plan your deliveries accordingly."]
    _docx(assets / "office_memo.docx", memo)
    _docx(assets / "office_memo_gold.docx", [m for m in memo if not m.startswith("DRAFT")])
    out.append(task(
        "writer-delete-draft-line", DOMAIN,
        "Delete the whole paragraph that starts with 'DRAFT' from office_memo.docx and save the document.",
        APPS, _open("office_memo.docx"), _same_text("office_memo.docx", "office_memo_gold.docx"),
        [*START, key("Down"), key("shift", "Down"), key("Delete"), *SAVE],
    ))

    essay = ["On Reading", "Books open doors to other lives.", "A reader lives a thousand lives before he dies.",
             "That is why libraries matter."]
    _docx(assets / "on_reading.docx", essay)
    out.append(task(
        "writer-italic-quote", DOMAIN,
        "In on_reading.docx, make the third paragraph (the quotation 'A reader lives a thousand lives before he "
        "dies.') italic, and save.",
        APPS, _open("on_reading.docx"),
        _checked("on_reading.docx", "on_reading.docx",
                 {"paragraphs": [{"match": "^A reader lives", "italic": True},
                                 {"match": "^Books open", "italic": False}]}),
        [*START, key("Down"), key("Down"), key("Home"), key("shift", "End"), key("ctrl", "i"), *SAVE],
    ))

    notes = ["Attendees: Ana, Ben and Chloe", "Decision: ship version two in June", "Owner: Ben prepares the demo"]
    (assets / "meeting_notes_gold.txt").write_text("\n".join(notes) + "\n", encoding="utf-8")
    out.append(task(
        "writer-new-meeting-notes", DOMAIN,
        "Write a new Writer document with exactly these three lines: 'Attendees: Ana, Ben and Chloe', "
        "'Decision: ship version two in June', 'Owner: Ben prepares the demo'. Save it as meeting_notes.odt in "
        "the Documents folder of your home directory.",
        APPS,
        [execute("mkdir -p ~/Documents", shell=True), launch(["soffice", "--writer"]), sleep(5)],
        {"func": "compare_document_text", "result": vm_file("~/Documents/meeting_notes.odt", "meeting_notes.odt"),
         "expected": gold("meeting_notes_gold.txt")},
        [wait(1.0), *lines(notes[0], notes[1]), type_(notes[2]), key("ctrl", "shift", "s"), wait(2.0),
         key("ctrl", "a"), type_("meeting_notes"), key("Return"), wait(2.5)],
    ))

    letter = ["Dear customer,", "Thank you for teh quick reply.", "We will ship teh order tomorrow.",
              "Kind regards"]
    _docx(assets / "customer_letter.docx", letter)
    _docx(assets / "customer_letter_gold.docx", [p.replace("teh", "the") for p in letter])
    out.append(task(
        "writer-fix-typos", DOMAIN,
        "customer_letter.docx misspells 'the' as 'teh'. Correct every occurrence and save the document.",
        APPS, _open("customer_letter.docx"), _same_text("customer_letter.docx", "customer_letter_gold.docx"),
        [wait(1.0), *_find_replace("teh", "the"), *SAVE],
    ))

    agenda = ["Workshop agenda", "Opening remarks", "Hands-on session", "Wrap-up"]
    _docx(assets / "workshop_agenda.docx", agenda)
    _docx(assets / "workshop_agenda_gold.docx", ["Date: 2024-05-14"] + agenda)
    out.append(task(
        "writer-insert-date-line", DOMAIN,
        "Insert a new first paragraph 'Date: 2024-05-14' at the very top of workshop_agenda.docx and save.",
        APPS, _open("workshop_agenda.docx"), _same_text("workshop_agenda.docx", "workshop_agenda_gold.docx"),
        [*START, type_("Date: 2024-05-14"), key("Return"), *SAVE],
    ))
    return out
