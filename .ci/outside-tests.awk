# Prints `file:line: text` for each line matching the regular expression `pattern` (set
# with -v) outside #[cfg(test)] items: an item under the attribute is skipped by counting
# braces from the attribute to the end of the item it marks.
FNR == 1 { skipping = 0 }
/#\[cfg\(test\)\]/ { skipping = 1; depth = 0; opened = 0; next }
skipping {
    line = $0
    opens = gsub(/\{/, "", line); closes = gsub(/\}/, "", line)
    depth += opens - closes
    if (opens > 0) opened = 1
    if (opened && depth <= 0) skipping = 0
    next
}
$0 ~ pattern { print FILENAME ":" FNR ": " $0 }
