//! Where a statement typed or piped into the shell ends: at a `;` outside strings, quoted
//! names and comments, as the SQL tokenizer sees it.

use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

/// Whether a statement that was not complete may be once `line` is added: its last token
/// must then be a `;`, on this line or before a block comment this line closes. Tokenizing
/// the whole statement again at every line made a long one quadratic (a 2,000-line
/// statement spent 4 s splitting lines).
pub fn may_end_statement(line: &str) -> bool {
    line.contains(';') || line.contains("*/")
}

/// Whether `text` holds whole statements: its last token, past comments, is `;` (and no
/// string or quoted name is left open).
pub fn is_complete(text: &str) -> bool {
    let Ok(tokens) = Tokenizer::new(&GenericDialect {}, text).tokenize() else {
        return false;
    };
    tokens
        .iter()
        .rev()
        .find(|t| !matches!(t, Token::Whitespace(_)))
        .is_some_and(|t| *t == Token::SemiColon)
}

/// Whether `text` holds anything but whitespace and comments.
pub fn has_sql(text: &str) -> bool {
    match Tokenizer::new(&GenericDialect {}, text).tokenize() {
        Ok(tokens) => tokens.iter().any(|t| !matches!(t, Token::Whitespace(_))),
        // Unfinished (an open string): the session says what is wrong with it.
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_end_at_a_semicolon_outside_strings_and_comments() {
        assert!(may_end_statement("  1;"));
        assert!(may_end_statement("closed */"));
        assert!(!may_end_statement("  + 1 -- no end here"));
        let pending = "SELECT 1; /* a note\n";
        assert!(!is_complete(pending) && is_complete(&format!("{pending}*/\n")));
        assert!(is_complete("SELECT 1;"));
        assert!(is_complete("SELECT 1;\n"));
        assert!(is_complete("SELECT 1; -- done\n"));
        assert!(!is_complete("SELECT 1"));
        assert!(!is_complete("SELECT ';"));
        assert!(!is_complete("SELECT 1 -- ;\n"));
        assert!(!is_complete("SELECT 1; SELECT\n 2"));
    }
}
