"""Closing a window politely, as a window manager's close button does: one EWMH ``_NET_CLOSE_WINDOW`` client
message, sent through libX11 directly (xdotool has no polite close)."""

from __future__ import annotations

import ctypes
import ctypes.util


class _XClientMessageEvent(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("serial", ctypes.c_ulong),
        ("send_event", ctypes.c_int),
        ("display", ctypes.c_void_p),
        ("window", ctypes.c_ulong),
        ("message_type", ctypes.c_ulong),
        ("format", ctypes.c_int),
        ("data", ctypes.c_long * 5),
    ]


class _XEvent(ctypes.Union):
    _fields_ = [("xclient", _XClientMessageEvent), ("pad", ctypes.c_long * 24)]


_CLIENT_MESSAGE = 33
_SUBSTRUCTURE_MASKS = (1 << 19) | (1 << 20)  # SubstructureNotify | SubstructureRedirect


def send_close_request(display: str, window_id: int) -> None:
    """Send ``_NET_CLOSE_WINDOW`` to the root window (xdotool has no polite close).

    Only the root window is addressed, so no X error (and no Xlib exit) can
    follow from a window that vanished meanwhile.
    """
    libname = ctypes.util.find_library("X11") or "libX11.so.6"
    x11 = ctypes.CDLL(libname)
    x11.XOpenDisplay.restype = ctypes.c_void_p
    x11.XOpenDisplay.argtypes = [ctypes.c_char_p]
    x11.XDefaultRootWindow.restype = ctypes.c_ulong
    x11.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
    x11.XInternAtom.restype = ctypes.c_ulong
    x11.XInternAtom.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    x11.XSendEvent.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_long, ctypes.c_void_p]
    x11.XFlush.argtypes = [ctypes.c_void_p]
    x11.XCloseDisplay.argtypes = [ctypes.c_void_p]
    dpy = x11.XOpenDisplay(display.encode())
    if not dpy:
        raise OSError(f"cannot open display {display}")
    try:
        root = x11.XDefaultRootWindow(dpy)
        event = _XEvent()
        msg = event.xclient
        msg.type = _CLIENT_MESSAGE
        msg.send_event = 1
        msg.window = window_id
        msg.message_type = x11.XInternAtom(dpy, b"_NET_CLOSE_WINDOW", 0)
        msg.format = 32
        msg.data[0] = 0  # CurrentTime
        msg.data[1] = 2  # source indication: pager / tool
        x11.XSendEvent(dpy, root, 0, _SUBSTRUCTURE_MASKS, ctypes.byref(event))
        x11.XFlush(dpy)
    finally:
        x11.XCloseDisplay(dpy)
