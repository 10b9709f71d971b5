#!/bin/sh
tar czf "$HOME/backup.tar.gz" "$HOME/Documents"
