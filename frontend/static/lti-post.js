// The deep-linking answer goes back to the LMS as a signed form: sent at once, as the
// spec has it (the page's Continue button does the same where scripts do not run).
document.getElementById("lti-post").submit();
