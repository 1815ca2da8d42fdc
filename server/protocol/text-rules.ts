// The characters no text may hold, one rule for what a person types (core/text.ts) and what a model writes
// (vision.ts): a prompt either wrote is one the other could have.

// C0 control characters except tab (09), newline (0A) and carriage return (0D). No keyboard types
// them; a NUL or an escape sequence only breaks what comes later (an image backend, a terminal, a log).
// Nor a lone UTF-16 surrogate (\p{Cs}): it is no character, and SQLite would store U+FFFD in its place.
export const CONTROL_CHARACTER = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\p{Cs}]/u;

// In one line of text (a title) nothing may change how the text around it reads: no C0 control at all
// (tab and line breaks included), DEL, no C1 control (U+0080–U+009F), and none of Unicode's bidirectional
// controls (Bidi_Control: U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069): U+202E makes `gnp.exe` read as `exe.png`.
export const ONE_LINE_FORBIDDEN = /[\u0000-\u001F\u007F-\u009F\u2028\u2029\p{Bidi_Control}\p{Cs}]/u;
