"""LibreOffice Calc tasks: formulas, data entry, sorting, formatting, sheet management."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from environments.tasks.authoring.common import (
    click, download, gold, key, keys, open_, task, type_, vm_file, wait,
)

DOMAIN = "libreoffice_calc"
APPS = ["libreoffice_calc"]


def _xlsx(path: Path, rows: list[list[Any]], *, title: str = "Sheet1", bold_header: bool = False,
          freeze: str | None = None) -> None:
    import openpyxl
    from openpyxl.styles import Font

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = title
    for row in rows:
        ws.append(row)
    if bold_header:
        for cell in ws[1]:
            cell.font = Font(bold=True)
    ws.freeze_panes = freeze
    wb.save(path)


def _open(asset: str) -> list[dict[str, Any]]:
    return [download((asset, f"~/{asset}")), open_(f"~/{asset}")]


def _table(asset: str, rules: list[dict[str, Any]], *, with_gold: bool = True) -> dict[str, Any]:
    evaluator: dict[str, Any] = {
        "func": "compare_table",
        "result": vm_file(f"~/{asset}", asset),
        "options": {"rules": rules},
    }
    if with_gold:
        evaluator["expected"] = gold(asset.replace(".xlsx", "_gold.xlsx"))
    return evaluator


SAME_DATA = {"type": "sheet_data", "sheet_idx0": "RI0", "sheet_idx1": "EI0"}
SAVE = [key("ctrl", "s"), wait(2.0)]
START = [wait(1.0), key("ctrl", "Home")]


def _formula(coordinate: str, pattern: str) -> dict[str, Any]:
    return {"type": "check_cell", "sheet_idx": "RI0", "coordinate": coordinate,
            "props": {"formula": {"method": "re", "ref": pattern}}}


def tasks(assets: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    # 1. line totals with a formula filled down
    items = [["Notebook", 4, 2.5], ["Pencil", 12, 0.25], ["Stapler", 1, 7.75], ["Folder", 6, 1.5],
             ["Marker", 3, 1.25], ["Eraser", 8, 0.5]]
    head = ["Item", "Qty", "Unit Price", "Total"]
    _xlsx(assets / "office_supplies.xlsx", [head] + [r + [None] for r in items])
    _xlsx(assets / "office_supplies_gold.xlsx", [head] + [r + [r[1] * r[2]] for r in items])
    out.append(task(
        "calc-line-totals", DOMAIN,
        "In office_supplies.xlsx, fill the Total column (D2:D7) with formulas that multiply Qty by Unit Price, "
        "then save the file in its current format.",
        APPS, _open("office_supplies.xlsx"),
        _table("office_supplies.xlsx", [SAME_DATA, _formula("D2", r"^=(B2\*C2|C2\*B2)$")]),
        [*START, *keys("Right", "Right", "Right", "Down"), *keys(*["shift+Down"] * 5), type_("=B2*C2"),
         key("alt", "Return"), *SAVE],
    ))

    # 2. a total row with SUM
    expenses = [["Rent", 1200], ["Utilities", 180], ["Groceries", 420], ["Transport", 95], ["Insurance", 130],
                ["Internet", 45]]
    _xlsx(assets / "monthly_expenses.xlsx", [["Category", "Amount"]] + expenses)
    _xlsx(assets / "monthly_expenses_gold.xlsx",
          [["Category", "Amount"]] + expenses + [["Total", sum(e[1] for e in expenses)]])
    out.append(task(
        "calc-sum-total-row", DOMAIN,
        "Add a row below the data in monthly_expenses.xlsx: put the label 'Total' in column A and a SUM formula "
        "of all amounts in column B. Save the file.",
        APPS, _open("monthly_expenses.xlsx"),
        _table("monthly_expenses.xlsx", [SAME_DATA, _formula("B8", r"(?i)^=SUM\(B2:B7\)$")]),
        [*START, *keys(*["Down"] * 7), type_("Total"), key("Tab"), type_("=SUM(B2:B7)"), key("Return"), *SAVE],
    ))

    # 3. row averages
    grades = [["Ana", 78, 85, 92], ["Ben", 64, 70, 58], ["Chloe", 90, 88, 95], ["Dev", 55, 61, 67],
              ["Eli", 82, 79, 88]]
    head = ["Student", "Test 1", "Test 2", "Test 3", "Average"]
    _xlsx(assets / "grades.xlsx", [head] + [g + [None] for g in grades])
    _xlsx(assets / "grades_gold.xlsx", [head] + [g + [round(sum(g[1:]) / 3, 6)] for g in grades])
    rule_avg = dict(SAME_DATA, precision=4)
    out.append(task(
        "calc-average-column", DOMAIN,
        "In grades.xlsx, compute each student's average of the three tests in the Average column using the "
        "AVERAGE function, and save the file.",
        APPS, _open("grades.xlsx"),
        _table("grades.xlsx", [rule_avg, _formula("E2", r"(?i)^=AVERAGE\(B2:D2\)$")]),
        [*START, *keys("Right", "Right", "Right", "Right", "Down"), *keys(*["shift+Down"] * 4),
         type_("=AVERAGE(B2:D2)"), key("alt", "Return"), *SAVE],
    ))

    # 4. bold header row
    stock = [["SKU", "Product", "In Stock", "Reorder Level"], ["A-100", "Desk lamp", 14, 5],
             ["A-101", "Office chair", 3, 4], ["A-102", "Monitor stand", 9, 3], ["A-103", "Cable tray", 0, 6]]
    _xlsx(assets / "inventory.xlsx", stock)
    _xlsx(assets / "inventory_gold.xlsx", stock, bold_header=True)
    bold_rules: list[dict[str, Any]] = [SAME_DATA]
    for col in "ABCD":
        bold_rules.append({"type": "check_cell", "sheet_idx": "RI0", "coordinate": f"{col}1",
                           "props": {"bold": {"method": "eq", "ref": True}}})
    bold_rules.append({"type": "check_cell", "sheet_idx": "RI0", "coordinate": "B2",
                       "props": {"bold": {"method": "eq", "ref": False}}})
    out.append(task(
        "calc-bold-header", DOMAIN,
        "Make the header row (row 1) of inventory.xlsx bold, leaving the other rows unchanged, and save the file.",
        APPS, _open("inventory.xlsx"), _table("inventory.xlsx", bold_rules),
        [*START, key("shift", "space"), key("ctrl", "b"), *SAVE],
    ))

    # 5. rename the sheet (mouse: double-click the sheet tab)
    quarter = [["Month", "Revenue"], ["January", 15200], ["February", 14100], ["March", 16850]]
    _xlsx(assets / "quarterly.xlsx", quarter, title="Sheet1")
    _xlsx(assets / "quarterly_gold.xlsx", quarter, title="Q1 Revenue")
    out.append(task(
        "calc-rename-sheet", DOMAIN,
        "Rename the worksheet 'Sheet1' in quarterly.xlsx to 'Q1 Revenue' and save the file.",
        APPS, _open("quarterly.xlsx"),
        _table("quarterly.xlsx", [{"type": "sheet_name"}, SAME_DATA]),
        [wait(1.0), click(150, 767, "double_click"), wait(1.5), key("ctrl", "a"), type_("Q1 Revenue"),
         key("Return"), wait(0.5), *SAVE],
    ))

    # 6. sort descending through the Data menu (mouse)
    scores = [["Player", "Score"], ["Mira", 340], ["Tom", 515], ["Ines", 128], ["Raj", 470], ["Kai", 295]]
    _xlsx(assets / "leaderboard.xlsx", scores)
    _xlsx(assets / "leaderboard_gold.xlsx", [scores[0]] + sorted(scores[1:], key=lambda r: -r[1]))
    out.append(task(
        "calc-sort-descending", DOMAIN,
        "Sort the players in leaderboard.xlsx by Score from highest to lowest (keep the header row on top) "
        "and save the file.",
        APPS, _open("leaderboard.xlsx"), _table("leaderboard.xlsx", [SAME_DATA]),
        [*START, key("Right"), click(305, 28), wait(1.0), click(367, 88), wait(1.0), *SAVE],
    ))

    # 7. unit conversion formula
    temps = [["City", "Celsius", "Fahrenheit"], ["Oslo", -5, None], ["Lisbon", 18, None], ["Cairo", 35, None],
             ["Lima", 20, None], ["Quito", 10, None]]
    _xlsx(assets / "temperatures.xlsx", temps)
    _xlsx(assets / "temperatures_gold.xlsx", [temps[0]] + [[c, t, t * 9 / 5 + 32] for c, t, _ in temps[1:]])
    out.append(task(
        "calc-celsius-to-fahrenheit", DOMAIN,
        "Fill the Fahrenheit column of temperatures.xlsx with formulas converting each Celsius value "
        "(F = C * 9/5 + 32), then save.",
        APPS, _open("temperatures.xlsx"), _table("temperatures.xlsx", [SAME_DATA, _formula("C2", r"B2")]),
        [*START, *keys("Right", "Right", "Down"), *keys(*["shift+Down"] * 4), type_("=B2*9/5+32"),
         key("alt", "Return"), *SAVE],
    ))

    # 8. text function
    codes = [["Code", "Normalized"], ["ab-12", None], ["xk-07", None], ["mn-33", None], ["qt-90", None]]
    _xlsx(assets / "product_codes.xlsx", codes)
    _xlsx(assets / "product_codes_gold.xlsx", [codes[0]] + [[c, c.upper()] for c, _ in codes[1:]])
    out.append(task(
        "calc-uppercase-codes", DOMAIN,
        "In product_codes.xlsx, fill the Normalized column with the upper-case version of each code using "
        "the UPPER function, and save.",
        APPS, _open("product_codes.xlsx"),
        _table("product_codes.xlsx", [SAME_DATA, _formula("B2", r"(?i)^=UPPER\(A2\)$")]),
        [*START, *keys("Right", "Down"), *keys(*["shift+Down"] * 3), type_("=UPPER(A2)"), key("alt", "Return"),
         *SAVE],
    ))

    # 9. data entry
    sales = [["Region", "January", "February", "March"], ["North", 110, 104, None], ["South", 87, 92, None],
             ["East", 130, 121, None]]
    march = [120, 95, 143]
    _xlsx(assets / "regional_sales.xlsx", sales)
    _xlsx(assets / "regional_sales_gold.xlsx", [sales[0]] + [r[:3] + [m] for r, m in zip(sales[1:], march)])
    out.append(task(
        "calc-enter-march-figures", DOMAIN,
        "Enter the March figures into regional_sales.xlsx: North 120, South 95, East 143. Save the file.",
        APPS, _open("regional_sales.xlsx"), _table("regional_sales.xlsx", [SAME_DATA]),
        [*START, *keys("Right", "Right", "Right", "Down"), type_("120"), key("Return"), type_("95"),
         key("Return"), type_("143"), key("Return"), *SAVE],
    ))

    # 10. delete blank rows
    people = [["Name", "Team"], ["Ada", "Core"], [None, None], ["Grace", "Compilers"], ["Linus", "Kernel"],
              [None, None], ["Barbara", "Languages"]]
    _xlsx(assets / "team_roster.xlsx", people)
    _xlsx(assets / "team_roster_gold.xlsx", [r for r in people if r[0]])
    out.append(task(
        "calc-delete-blank-rows", DOMAIN,
        "team_roster.xlsx has empty rows inside the list. Delete those empty rows so the list is contiguous, "
        "then save.",
        APPS, _open("team_roster.xlsx"), _table("team_roster.xlsx", [SAME_DATA]),
        [*START, *keys("Down", "Down"), key("shift", "space"), key("ctrl", "minus"), wait(0.5),
         *keys("Down", "Down"), key("shift", "space"), key("ctrl", "minus"), wait(0.5), *SAVE],
    ))

    # 11. freeze the header row through the View menu (mouse)
    log_rows = [["Date", "Steps"]] + [[f"2024-03-{d:02d}", 4000 + 37 * d] for d in range(1, 31)]
    _xlsx(assets / "step_log.xlsx", log_rows)
    _xlsx(assets / "step_log_gold.xlsx", log_rows, freeze="A2")
    out.append(task(
        "calc-freeze-header", DOMAIN,
        "Freeze the first row of step_log.xlsx so the header stays visible while scrolling, and save the file.",
        APPS, _open("step_log.xlsx"),
        _table("step_log.xlsx", [SAME_DATA, {"type": "check_cell", "sheet_idx": "RI0", "coordinate": "A1",
                                              "props": {"value": {"method": "eq", "ref": "Date"}}},
                                 {"type": "freeze", "sheet_idx0": "RI0", "sheet_idx1": "EI0"}]),
        [*START, click(82, 28), wait(1.0), click(132, 345), wait(1.0), click(360, 361), wait(1.0), *SAVE],
    ))

    # 12. percentage of total with an absolute reference
    votes = [["Option", "Votes", "Share"], ["Tea", 45, None], ["Coffee", 30, None], ["Juice", 15, None],
             ["Water", 10, None]]
    _xlsx(assets / "poll.xlsx", votes)
    _xlsx(assets / "poll_gold.xlsx", [votes[0]] + [[o, v, v / 100] for o, v, _ in votes[1:]])
    out.append(task(
        "calc-share-of-total", DOMAIN,
        "In poll.xlsx, fill the Share column with each option's fraction of all votes (Votes divided by the "
        "sum of B2:B5, using an absolute reference to the range), and save.",
        APPS, _open("poll.xlsx"), _table("poll.xlsx", [dict(SAME_DATA, precision=6), _formula("C2", r"\$B\$2:\$B\$5")]),
        [*START, *keys("Right", "Right", "Down"), *keys(*["shift+Down"] * 3), type_("=B2/SUM($B$2:$B$5)"),
         key("alt", "Return"), *SAVE],
    ))
    return out
