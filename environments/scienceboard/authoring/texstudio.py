"""TeXstudio tasks: edit a LaTeX document (``file`` / ``include``) so that it still compiles (``compile``).

Each task writes its document with an initialize ``touch`` and opens it in
TeXstudio (``--start-always``: TeXstudio otherwise hands the file to an
instance already running for the same user, possibly on another desktop of
this host). The oracles move with Go to Line (Ctrl+G), type, dismiss the
completer with Escape (it would otherwise insert its own text on Return) and
save with Ctrl+S.
"""

from __future__ import annotations

from typing import Any

from environments.scienceboard.authoring.common import HOME, answer, done, enter, key, stop, task, type_, wait

APP = "TeXstudio"
DIR = f"{HOME}/atelier"
MAIN = f"{DIR}/main.tex"
COMPILE = {"type": "compile", "path": DIR, "file": "main"}


def setup(text: str, *extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"func": "touch", "path": MAIN, "text": text}, *extra,
            {"func": "launch", "command": f"texstudio --start-always --no-session {MAIN}", "shell": True,
             "window": "main.tex - TeXstudio", "wait": 1}]


def goto(line: int) -> list[dict[str, Any]]:
    return [key("ctrl", "g"), wait(0.5), type_(str(line)), enter(), wait(0.3)]


def write(*lines: str) -> list[dict[str, Any]]:
    """Type lines at the cursor, each followed by Escape (close the completer) and Enter except the last."""
    out: list[dict[str, Any]] = []
    for index, line in enumerate(lines):
        if line:
            out += [type_(line), key("Escape")]
        if index + 1 < len(lines):
            out.append(enter())
    return out


def replace(search: str, replacement: str) -> list[dict[str, Any]]:
    """Select the first match with the find panel (Ctrl+R), close it, type over the selection."""
    return [key("ctrl", "r"), wait(0.5), type_(search), key("Escape"), type_(replacement)]


def save() -> list[dict[str, Any]]:
    return [key("ctrl", "s"), wait(1)]


def doc(*body: str, preamble: str = "") -> str:
    head = "\\documentclass[11pt]{article}\n" + preamble
    return head + "\\begin{document}\n\n" + "\n\n".join(body) + "\n\n\\end{document}\n"


FIBONACCI = doc(
    "\\section*{Fibonacci numbers}",
    "\\begin{tabular}{|c|c|c|c|c|}\n\\hline\n$f(8)$ & $f(12)$ & $f(16)$ & $f(20)$ & $f(24)$ \\\\\n\\hline\n"
    "$21$ & $144$ & $987$ & $6765$ & $38657$ \\\\\n\\hline\n\\end{tabular}",
)
ALIGN = doc("The two identities are\n\\begin{align}\n(a+b)^2 &= a^2 + 2ab + b^2 \\\\\n(a-b)^2 &= a^2 - 2ab + b^2\n"
            "\\end{align}")
ITEMIZE = ("\\documentclass[11pt]{article}\n\\begin{document}\n\nSamples to prepare:\n\\begin{itemize}\n"
           "\\item buffer solution\n\\item enzyme extract\n\\item substrate\n\n\\end{document}\n")
RESULTS = doc("\\section{Method}\nWe measured the growth rate of the crystals at five temperatures.",
              "The measurements show a linear increase of the growth rate with temperature.")
REFS = ("@book{knuth1984,\n  author = {Donald E. Knuth},\n  title = {The {\\TeX}book},\n"
        "  publisher = {Addison-Wesley},\n  year = {1984}\n}\n")
CITING = doc("Typesetting mathematics is discussed at length in \\cite{knuth1984}.")
SECTIONS = doc("\\section{Introduction}\nWhy the sky is blue.", "\\section{Scattering}\nRayleigh scattering.",
               "\\section{Conclusion}\nShort wavelengths scatter more.")


def tasks() -> list[dict[str, Any]]:
    angle = doc("In the crystal structure, the bond angle between the two oxygen atoms is approximately xxx.xx "
                "degrees.")
    boiling = doc("At sea level, pure water boils at 90 degrees Celsius.")
    typo = doc("The experimnet was repeated three times under identical conditions.")
    titled = doc("\\maketitle\n\nThis report summarizes the results.", preamble="\\title{TITLE}\n\\author{Lab 3}\n")
    table_sum = doc("\\begin{tabular}{|l|r|}\n\\hline\nSample A & 12 \\\\\nSample B & 30 \\\\\nSample C & 7 \\\\\n"
                    "\\hline\nTotal & ??? \\\\\n\\hline\n\\end{tabular}")
    first_paragraph = doc("Mass and energy are equivalent.", "This relation is at the heart of nuclear physics.")
    return [
        task("texstudio-fill-angle", APP, "Replace the placeholder 'xxx.xx' in the document open in TeXstudio with "
             "the value 109.03, and save the document.", setup(angle),
             [{"type": "file", "path": MAIN, "source": "xxx.xx", "target": "109.03"}, COMPILE],
             replace("xxx.xx", "109.03") + save() + [done()]),
        task("texstudio-fix-fibonacci", APP, "The value of f(24) in the Fibonacci table open in TeXstudio is wrong. "
             "Replace it with the correct Fibonacci number and save.", setup(FIBONACCI),
             [{"type": "file", "path": MAIN, "source": "38657", "target": "46368"}, COMPILE],
             replace("38657", "46368") + save() + [done()]),
        task("texstudio-fix-boiling-point", APP, "The document open in TeXstudio states a wrong boiling point of "
             "water at sea level. Correct the number and save.", setup(boiling),
             [{"type": "file", "path": MAIN, "source": "boils at 90", "target": "boils at 100"}, COMPILE],
             replace("boils at 90", "boils at 100") + save() + [done()]),
        task("texstudio-fix-typo", APP, "Correct the misspelled word in the document open in TeXstudio and save.",
             setup(typo), [{"type": "file", "path": MAIN, "source": "experimnet", "target": "experiment"}, COMPILE],
             replace("experimnet", "experiment") + save() + [done()]),
        task("texstudio-set-title", APP, "Set the title of the document open in TeXstudio to 'Crystal Growth "
             "Kinetics' (it is TITLE now), and save.", setup(titled),
             [{"type": "file", "path": MAIN, "source": "\\title{TITLE}", "target": "\\title{Crystal Growth Kinetics}"},
              COMPILE], replace("{TITLE}", "{Crystal Growth Kinetics}") + save() + [done()]),
        task("texstudio-table-total", APP, "Fill in the total of the table in the document open in TeXstudio, "
             "replacing '???', and save.", setup(table_sum),
             [{"type": "file", "path": MAIN, "source": "???", "target": "49"}, COMPILE],
             replace("???", "49") + save() + [done()]),
        task("texstudio-add-amsmath", APP, "The document open in TeXstudio does not compile because the align "
             "environment is undefined. Load the package that provides it, and save.", setup(ALIGN),
             [{"type": "include", "path": MAIN, "pattern": r"\\usepackage(\[[^\]]*\])?\{amsmath\}"}, COMPILE],
             goto(1) + [key("End"), enter()] + write("\\usepackage{amsmath}") + save() + [done()]),
        task("texstudio-close-itemize", APP, "The list in the document open in TeXstudio is never closed, so the "
             "document does not compile. Close the list after its last item, and save.", setup(ITEMIZE),
             [{"type": "include", "path": MAIN, "pattern": r"\\item substrate\s*\\end\{itemize\}"}, COMPILE],
             goto(8) + [key("End"), enter()] + write("\\end{itemize}") + save() + [done()]),
        task("texstudio-add-results-section", APP, "Add a section titled 'Results' right before the paragraph that "
             "starts with 'The measurements show', and save.", setup(RESULTS),
             [{"type": "include", "path": MAIN, "pattern": r"\\section\{Results\}\s*The measurements show"}, COMPILE],
             goto(7) + [key("Home")] + write("\\section{Results}", "") + save() + [done()]),
        task("texstudio-add-equation", APP, "Right after the sentence 'Mass and energy are equivalent.', add the "
             "numbered equation E = mc^2 in an equation environment, and save.", setup(first_paragraph),
             [{"type": "include", "path": MAIN,
               "pattern": r"equivalent\.\s*\\begin\{equation\}\s*E\s*=\s*mc\^2\s*\\end\{equation\}"}, COMPILE],
             goto(4) + [key("End"), enter()] + write("\\begin{equation}", "E = mc^2", "\\end{equation}") + save()
             + [done()]),
        task("texstudio-add-bibliography", APP, "The document open in TeXstudio cites a book from refs.bib in the "
             "same folder but has no bibliography. Add it with the plain style just before \\end{document}, and "
             "save.", setup(CITING, {"func": "touch", "path": f"{DIR}/refs.bib", "text": REFS}),
             [{"type": "include", "path": MAIN, "pattern": r"\\bibliographystyle\{plain\}"},
              {"type": "include", "path": MAIN, "pattern": r"\\bibliography\{refs(\.bib)?\}"}, COMPILE],
             goto(6) + [key("Home")] + write("\\bibliographystyle{plain}", "\\bibliography{refs}", "")
             + save() + [done()]),
        task("texstudio-count-sections-answer", APP, "How many numbered sections does the document open in "
             "TeXstudio have? Submit the number as your answer.", setup(SECTIONS), [stop("ANS", "3")],
             [answer("3")], steps=5, ans="ANS 3"),
    ]
