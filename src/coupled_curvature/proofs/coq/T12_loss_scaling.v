(* T12, loss scaling L -> sL (s <> 0; mean vs sum reduction is s = N), for every block size n:
   g -> s g and H -> s H, so D -> D/s, D⁺ -> s D⁺, ρ -> ρ/s, and D·D⁺ is invariant. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import ring.
From CoupledCurvature Require Import Defs Common T04_invariance_group T07_pseudo_inverse.
From CoupledCurvature Require Import T08_monotonicity T11_larger_groups.

Section T12.
Variable R : rcfType.
Variable n : nat.
Implicit Types (w g : 'cV[R]_n) (H : 'M[R]_n).

Theorem T12_D (s : R) w g H : s != 0 ->
  coupledD w (s *: g) (s *: H) = coupledD w g H / s.
Proof.
move=> s0; rewrite /coupledD /RQ quad_scale sqnormZ.
set q := quad H w; set a := (sqnorm w)^-1; set b := sqnorm g.
have [->|b0] := eqVneq b 0; first by rewrite mulr0 !invr0 !mulr0 mul0r.
by field; rewrite s0 b0.
Qed.

Theorem T12_Dplus (s : R) w g H : s != 0 ->
  coupledDplus w (s *: g) (s *: H) = s * coupledDplus w g H.
Proof.
move=> s0; rewrite /coupledDplus pinv_scale quad_scale sqnormZ.
set q := quad _ w; set a := (sqnorm w)^-1; field; exact: s0.
Qed.

Theorem T12_rho (s : R) w g H : s != 0 ->
  radial_ratio w (s *: g) (s *: H) = radial_ratio w g H / s.
Proof.
move=> s0; rewrite /radial_ratio quad_scale dotZr.
set q := quad H w; set d := dot w g.
have [->|d0] := eqVneq d 0; first by rewrite !mulr0 expr0n /= !invr0 !mulr0 mul0r.
by field; rewrite s0 d0.
Qed.

Theorem T12_product (s : R) w g H : s != 0 ->
  coupledD w (s *: g) (s *: H) * coupledDplus w (s *: g) (s *: H)
  = coupledD w g H * coupledDplus w g H.
Proof.
move=> s0; rewrite T12_D // T12_Dplus //.
set x := coupledD w g H; set y := coupledDplus w g H; field; exact: s0.
Qed.

End T12.

(* Instance: w = g = e₀, H = I (any n >= 1) has D = 1; under L -> 2L (g -> 2g, H -> 2H) D moves
   to 1/2 and D⁺ from 1 to 2, while D·D⁺ stays 1. *)
Lemma T12_instance (R : rcfType) (n : nat) :
  let w := e (0 : 'I_n.+1) in let H : 'M[R]_n.+1 := 1%:M in
  [/\ coupledD w w H = 1, coupledD w ((2 : R) *: w) (2 *: H) = 2^-1,
      coupledDplus w w H = 1 & coupledDplus w ((2 : R) *: w) (2 *: H) = 2].
Proof.
move=> w H; have t0 : (2 : R) != 0 by rewrite pnatr_eq0.
have D1 : coupledD w w H = 1 by rewrite coupledD_e1.
have P1 : coupledDplus w w H = 1.
  by rewrite /coupledDplus pinv_unit ?unitmx1 // invmx1 quad1 !sqnorm_e divr1 mulr1.
by split; rewrite ?T12_D ?T12_Dplus // ?D1 ?P1 ?div1r ?mulr1.
Qed.
