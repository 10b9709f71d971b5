"""The tally application: a value and three buttons, drawn with Pillow.

Layout on the agent's 0..1000 grid (any screen size): the value in the upper half, then three buttons in a row,
``-`` (x 100..300), ``+`` (x 400..600) and ``reset`` (x 700..900), each y 600..850.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from core.types import Screenshot

#: button name -> (x0, y0, x1, y1) on the 0..1000 grid
BUTTONS: dict[str, tuple[int, int, int, int]] = {
    "minus": (100, 600, 300, 850),
    "plus": (400, 600, 600, 850),
    "reset": (700, 600, 900, 850),
}
LABELS = {"minus": "-", "plus": "+", "reset": "reset"}
LIMIT = 99  # the display's range is -LIMIT..LIMIT


@dataclass
class Tally:
    value: int = 0
    presses: int = 0

    def button_at(self, x: int, y: int) -> str | None:
        for name, (x0, y0, x1, y1) in BUTTONS.items():
            if x0 <= x <= x1 and y0 <= y <= y1:
                return name
        return None

    def press(self, button: str) -> str:
        """Press ``button``; the feedback line the agent reads."""
        self.presses += 1
        if button == "plus":
            self.value = min(LIMIT, self.value + 1)
        elif button == "minus":
            self.value = max(-LIMIT, self.value - 1)
        elif button == "reset":
            self.value = 0
        else:
            raise ValueError(f"the tally has no button {button!r}; buttons: {', '.join(BUTTONS)}")
        return f"pressed {LABELS[button]}"

    def render(self, width: int, height: int) -> Screenshot:
        from PIL import Image, ImageDraw, ImageFont

        image = Image.new("RGB", (width, height), (245, 245, 240))
        draw = ImageDraw.Draw(image)

        def box(x0: int, y0: int, x1: int, y1: int) -> tuple[int, int, int, int]:
            return (x0 * width // 1000, y0 * height // 1000, x1 * width // 1000, y1 * height // 1000)

        big = ImageFont.load_default(size=max(12, height // 4))
        small = ImageFont.load_default(size=max(8, height // 12))
        draw.text((width // 2, height * 3 // 10), str(self.value), fill=(20, 20, 20), font=big, anchor="mm")
        for name, rect in BUTTONS.items():
            x0, y0, x1, y1 = box(*rect)
            draw.rectangle((x0, y0, x1, y1), fill=(200, 215, 235), outline=(60, 80, 120), width=2)
            draw.text(((x0 + x1) // 2, (y0 + y1) // 2), LABELS[name], fill=(20, 30, 60), font=small, anchor="mm")
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        return Screenshot(png=buffer.getvalue(), width=width, height=height)
