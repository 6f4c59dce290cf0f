#!/usr/bin/perl
# A Gearman client over TLS with Perl's Gearman::Client (use_ssl, its
# IO::Socket::SSL): it submits one background job and prints its handle.
#
#   perl_tls_client.pl PORT SERVER_NAME CA_FILE CERT KEY FUNCTION PAYLOAD
#
# CERT and KEY "-": no client certificate. The server's certificate is
# checked against CA_FILE and SERVER_NAME. Exit status 1 when no job was
# created.
use strict;
use warnings;
use Gearman::Client;

my ($port, $name, $ca, $cert, $key, $func, $payload) = @ARGV;
my %js = (host => "127.0.0.1", port => $port, use_ssl => 1, ca_file => $ca,
    socket_cb => sub {
        my ($opts) = @_;
        $opts->{SSL_verify_mode} = 1;    # SSL_VERIFY_PEER
        $opts->{SSL_verifycn_scheme} = "default";
        $opts->{SSL_verifycn_name} = $name;
        $opts->{SSL_hostname} = $name;
    });
if ($cert ne "-") {
    $js{cert_file} = $cert;
    $js{key_file}  = $key;
}
my $client = Gearman::Client->new(job_servers => [\%js]);
my $handle = $client->dispatch_background($func, \$payload);
die "no job created\n" unless defined $handle;
print "handle: $handle\n";
