package engines

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// PasswordBytes is the entropy of a generated password: 16 bytes, 32 hex
// characters.
const PasswordBytes = 16

// NewPassword returns 32 hex characters from crypto/rand.
func NewPassword() (string, error) {
	b := make([]byte, PasswordBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("engines: generate password: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// NewCredentials returns the default user and database with a fresh
// password.
func NewCredentials() (Credentials, error) {
	pw, err := NewPassword()
	if err != nil {
		return Credentials{}, err
	}
	return Credentials{User: DefaultUser, Password: pw, Database: DefaultDatabase}, nil
}
