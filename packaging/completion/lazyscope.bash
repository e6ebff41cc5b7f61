# bash completion for lazyscope and lazyscope-cli. Commands and options are read from the
# programs' own --help, so the completion always matches the installed version.

# Prints one line per entry of a --help section: "name" for commands and flags, "name=" for
# options that take a value. $1: section (Options or Subcommands); the rest: the command.
_lazyscope_help_section() {
  local section="$1"
  shift
  QT_QPA_PLATFORM=offscreen "$@" --help 2>/dev/null | awk -v want="$section" '
    /^[A-Za-z][A-Za-z ]*:[ ]*$/ { sub(/:[ ]*$/, ""); inside = ($0 == want); next }
    !inside || !/^  [^ ]/ { next }
    {
      line = $0
      sub(/^ +/, "", line)
      head = line
      if (match(line, /   */)) head = substr(line, 1, RSTART - 1)
      n = split(head, words, /[ ,]+/)
      takes_value = 0
      for (i = 1; i <= n; i++) if (words[i] != "" && words[i] !~ /^-/) takes_value = 1
      for (i = 1; i <= n; i++) {
        if (want == "Subcommands") { if (i == 1) print words[i]; continue }
        if (words[i] ~ /^-/) print words[i] (takes_value ? "=" : "")
      }
    }'
}

_lazyscope() {
  local cur prev
  cur="${COMP_WORDS[COMP_CWORD]}"
  prev="${COMP_CWORD:+${COMP_WORDS[COMP_CWORD - 1]}}"
  local -a command=("${COMP_WORDS[0]}")
  local i word
  # Follow the subcommands typed so far (lazyscope-cli corpus search ...).
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="${COMP_WORDS[i]}"
    [[ "$word" == -* ]] && continue
    if _lazyscope_help_section Subcommands "${command[@]}" | grep -qxF -- "$word"; then
      command+=("$word")
    fi
  done
  local options
  options=$(_lazyscope_help_section Options "${command[@]}")
  # After an option that takes a value: offer files (model folders, requests, databases).
  if [[ "$prev" == -* ]] && grep -qxF -- "$prev=" <<<"$options"; then
    COMPREPLY=($(compgen -f -- "$cur"))
    return 0
  fi
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$(sed 's/=$//' <<<"$options")" -- "$cur"))
    return 0
  fi
  local subcommands
  subcommands=$(_lazyscope_help_section Subcommands "${command[@]}")
  if [ -n "$subcommands" ]; then
    COMPREPLY=($(compgen -W "$subcommands" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
  return 0
}
complete -o filenames -F _lazyscope lazyscope lazyscope-cli
