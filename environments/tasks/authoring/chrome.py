"""Chromium tasks on local web pages served from the loopback interface by ``formserver.py``.

Each task starts the page's little web app (which opens Chromium on it); the
app stores what the page submits as JSON in the desktop user's home, and the
judge reads that file. The download task checks the file Chromium saved.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from environments.tasks.authoring.common import WEBAPP_DIR, click, download, gold, key, keys, task, type_, vm_file, wait

DOMAIN = "chrome"
APPS = ["chromium"]

STYLE = ("body{font-family:sans-serif;margin:40px;font-size:18px}label{display:block;margin-top:14px}"
         "input,select,textarea{font-size:18px;padding:4px}table{border-collapse:collapse}"
         "td,th{border:1px solid #999;padding:6px 12px}button{font-size:18px;margin-top:16px}")


def _page(title: str, body: str, script: str = "") -> str:
    tail = f"<script>{script}</script>" if script else ""
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title><style>{STYLE}</style>"
            f"</head><body><h1>{title}</h1>{body}{tail}</body></html>\n")


def _serve(page: str, title: str, out: str, *extra: str) -> list[dict[str, Any]]:
    """Copy the web app onto the desktop, start it in the background, wait until Chromium shows the page."""
    files = [(name, f"{WEBAPP_DIR}/{name}") for name in ("formserver.py", page, *extra)]
    return [download(*files), {
        "type": "execute_with_verification",
        "parameters": {
            "command": f"nohup python3 {WEBAPP_DIR}/formserver.py --root {WEBAPP_DIR} --page {page} --out {out} "
                       ">/dev/null 2>&1 &",
            "shell": True,
            "verification": {"window_exists": title},
            "max_wait_time": 40,
            "check_interval": 0.5,
        },
    }]


def _json_rules(out: str, expect: list[dict[str, Any]], unexpect: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"func": "check_json", "result": vm_file(out, Path(out).name),
            "expected": {"type": "rule", "rules": {"expect": expect, "unexpect": unexpect or []}}}


def _eq(field: str, value: Any) -> dict[str, Any]:
    return {"key": [field], "method": "eq", "ref": value}


SUBMITTED = [wait(2.0)]


def tasks(assets: Path) -> list[dict[str, Any]]:
    shutil.copy(Path(__file__).with_name("formserver.py"), assets / "formserver.py")
    out: list[dict[str, Any]] = []

    (assets / "contact.html").write_text(_page("Contact us", (
        "<form method='post' action='/submit'>"
        "<label>Name <input name='name' autofocus></label>"
        "<label>Email <input name='email' type='email'></label>"
        "<label>Message <textarea name='message' rows='3' cols='40'></textarea></label>"
        "<button type='submit'>Send</button></form>")), encoding="utf-8")
    out.append(task(
        "chrome-contact-form", DOMAIN,
        "On the 'Contact us' page open in Chromium, send a message with name 'Rosa Diaz', email "
        "'rosa@example.org' and the message 'Please call me back tomorrow.'",
        APPS, _serve("contact.html", "Contact us", "~/submissions/contact.json"),
        _json_rules("~/submissions/contact.json", [_eq("name", "Rosa Diaz"), _eq("email", "rosa@example.org"),
                                                   _eq("message", "Please call me back tomorrow.")]),
        [wait(1.0), type_("Rosa Diaz"), key("Tab"), type_("rosa@example.org"), key("Tab"),
         type_("Please call me back tomorrow."), key("Tab"), key("Return"), *SUBMITTED],
    ))

    (assets / "signup.html").write_text(_page("Newsletter signup", (
        "<form method='post' action='/submit'>"
        "<label>Email <input name='email' type='email' autofocus></label>"
        "<label>Country <select name='country'><option value=''>Choose...</option><option value='DE'>Germany"
        "</option><option value='FR'>France</option><option value='PT'>Portugal</option><option value='ES'>Spain"
        "</option></select></label>"
        "<label><input type='checkbox' name='terms'> I accept the terms</label>"
        "<button type='submit'>Subscribe</button></form>")), encoding="utf-8")
    out.append(task(
        "chrome-newsletter-signup", DOMAIN,
        "Subscribe to the newsletter on the open page with the email 'li.wei@example.com', country Portugal, "
        "accepting the terms.",
        APPS, _serve("signup.html", "Newsletter signup", "~/submissions/signup.json"),
        _json_rules("~/submissions/signup.json", [_eq("email", "li.wei@example.com"), _eq("country", "PT"),
                                                  _eq("terms", "on")]),
        [wait(1.0), type_("li.wei@example.com"), key("Tab"), type_("Portugal"), key("Tab"), key("space"),
         key("Tab"), key("Return"), *SUBMITTED],
    ))

    report = "month,revenue\n2024-01,18200\n2024-02,17650\n2024-03,19900\n"
    (assets / "sales_report.csv").write_text(report, encoding="utf-8")
    (assets / "downloads.html").write_text(_page("Report downloads", (
        "<p>The quarterly sales report is ready.</p>"
        "<p><a id='report' href='sales_report.csv' download>Download sales_report.csv</a></p>"),
        "document.getElementById('report').focus();"), encoding="utf-8")
    out.append(task(
        "chrome-download-report", DOMAIN,
        "Download the quarterly sales report (sales_report.csv) from the open page into your Downloads folder.",
        APPS, _serve("downloads.html", "Report downloads", "~/submissions/unused.json", "sales_report.csv"),
        {"func": "compare_text_file", "result": vm_file("~/Downloads/sales_report.csv", "sales_report.csv"),
         "expected": gold("sales_report.csv")},
        [wait(1.0), key("Return"), wait(3.0)],
    ))

    products = [("Trail Backpack", "89.90"), ("Camping Stove", "54.00"), ("Headlamp", "24.50"),
                ("Sleeping Pad", "69.95")]
    rows = "".join(f"<tr><td>{n}</td><td>{p}</td></tr>" for n, p in products)
    (assets / "catalog.html").write_text(_page("Outdoor catalog", (
        f"<table><tr><th>Product</th><th>Price (EUR)</th></tr>{rows}</table>"
        "<form method='post' action='/submit'><label>Price of the Trail Backpack "
        "<input name='price' autofocus></label><button type='submit'>Submit</button></form>")), encoding="utf-8")
    out.append(task(
        "chrome-price-lookup", DOMAIN,
        "Look up the price of the Trail Backpack in the catalog table on the open page and submit it in the "
        "form below the table (just the number).",
        APPS, _serve("catalog.html", "Outdoor catalog", "~/submissions/price.json"),
        _json_rules("~/submissions/price.json", [{"key": ["price"], "method": "approx:0.001", "ref": 89.9}]),
        [wait(1.0), type_("89.90"), key("Return"), *SUBMITTED],
    ))

    (assets / "todo.html").write_text(_page("My tasks", (
        "<form id='add'><input id='item' autofocus placeholder='New task'> <button>Add</button></form>"
        "<ul id='list'></ul><button id='save'>Save list</button><p id='status'></p>"), (
        "const items=[];document.getElementById('add').addEventListener('submit',e=>{e.preventDefault();"
        "const i=document.getElementById('item');if(i.value.trim()){items.push(i.value.trim());"
        "const li=document.createElement('li');li.textContent=i.value.trim();"
        "document.getElementById('list').appendChild(li);i.value='';}});"
        "document.getElementById('save').addEventListener('click',()=>{fetch('/submit',{method:'POST',"
        "headers:{'Content-Type':'application/json'},body:JSON.stringify({items})}).then(()=>{"
        "document.getElementById('status').textContent='Saved';});});")), encoding="utf-8")
    out.append(task(
        "chrome-todo-list", DOMAIN,
        "Using the task list page in Chromium, add the tasks 'Water the plants' and 'Pay the rent' (in that "
        "order) and save the list.",
        APPS, _serve("todo.html", "My tasks", "~/submissions/todo.json"),
        _json_rules("~/submissions/todo.json", [_eq("items", ["Water the plants", "Pay the rent"])]),
        [wait(1.0), type_("Water the plants"), key("Return"), wait(0.3), type_("Pay the rent"), key("Return"),
         wait(0.3), key("Tab"), key("Tab"), key("Return"), *SUBMITTED],
    ))

    radios = "".join(f"<label style='display:inline;margin-right:12px'><input type='radio' name='rating' "
                     f"value='{n}'{' autofocus' if n == 1 else ''}> {n}</label>" for n in range(1, 6))
    (assets / "survey.html").write_text(_page("Service survey", (
        f"<form method='post' action='/submit'><p>How satisfied are you (1-5)?</p>{radios}"
        "<label>Comments <input name='comments' size='40'></label>"
        "<button type='submit'>Send survey</button></form>")), encoding="utf-8")
    out.append(task(
        "chrome-survey-rating", DOMAIN,
        "Fill in the service survey on the open page: give a rating of 4 and the comment 'Friendly staff', "
        "then send it.",
        APPS, _serve("survey.html", "Service survey", "~/submissions/survey.json"),
        _json_rules("~/submissions/survey.json", [_eq("rating", "4"), _eq("comments", "Friendly staff")]),
        [wait(1.0), key("space"), *keys("Right", "Right", "Right"), key("Tab"), type_("Friendly staff"),
         key("Return"), *SUBMITTED],
    ))

    lines_ = [("Design work", "80.00"), ("Hosting (3 months)", "37.50"), ("Domain renewal", "25.00")]
    rows = "".join(f"<tr><td>{d}</td><td>{a}</td></tr>" for d, a in lines_)
    (assets / "invoice.html").write_text(_page("Invoice 2024-117", (
        f"<table><tr><th>Item</th><th>Amount (EUR)</th></tr>{rows}</table>"
        "<form method='post' action='/submit'><label>Invoice total (EUR) <input name='total' autofocus></label>"
        "<button type='submit'>Approve</button></form>")), encoding="utf-8")
    out.append(task(
        "chrome-invoice-total", DOMAIN,
        "Add up the amounts of the invoice shown in Chromium and approve it by entering the total in the form.",
        APPS, _serve("invoice.html", "Invoice 2024-117", "~/submissions/invoice.json"),
        _json_rules("~/submissions/invoice.json", [{"key": ["total"], "method": "approx:0.001", "ref": 142.5}]),
        [wait(1.0), type_("142.50"), key("Return"), *SUBMITTED],
    ))

    big = "style='width:28px;height:28px;vertical-align:middle'"
    (assets / "settings.html").write_text(_page("Account settings", (
        "<form method='post' action='/submit' style='position:absolute;left:60px;top:120px'>"
        f"<label><input type='checkbox' name='email_notifications' checked {big}> Email notifications</label>"
        f"<label><input type='checkbox' name='dark_mode' {big}> Dark mode</label>"
        "<button type='submit' style='width:160px;height:48px'>Save settings</button></form>")), encoding="utf-8")
    out.append(task(
        "chrome-account-settings", DOMAIN,
        "On the account settings page, turn off email notifications, turn on dark mode, and save the settings.",
        APPS, _serve("settings.html", "Account settings", "~/submissions/settings.json"),
        _json_rules("~/submissions/settings.json", [_eq("dark_mode", "on")],
                    [{"key": ["email_notifications"], "method": "eq", "ref": "on"}]),
        [wait(1.0), click(78, 237), wait(0.3), click(78, 285), wait(0.3), click(140, 343), *SUBMITTED],
    ))
    return out
