(* T6 for n = 1: D = H/g² (coupledD_n1), and a reparameterization w = φ(w') with
   g' = φ'(w') g, H' = φ'(w')² H + φ''(w') g keeps D for every loss (every g != 0 and H) at w'
   iff φ''(w') = 0 (n1_pointwise); φ'' = 0 everywhere iff φ is affine, w' |-> s w' + a
   (n1_affine_iff; s != 0 when φ is a diffeomorphism). *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import boolp classical_sets functions reals topology normedtype derive realfun.
From CoupledCurvature Require Import DefsAnalytic.

Section N1.
Variable R : realType.

(* in one dimension D does not depend on w: D = H / g² *)
Lemma coupledD_n1 (w g : 'cV[R]_1) (H : 'M[R]_1) :
  w 0 0 != 0 -> coupledD w g H = H 0 0 / g 0 0 ^+ 2.
Proof.
move=> w0; rewrite /coupledD /RQ /quad /sqnorm /dot !mxE !big_ord1 !mxE ?big_ord1 ?mxE.
by rewrite mulrCA mulfK ?mulf_neq0 // expr2.
Qed.

(* pointwise: with J = φ'(w') != 0 and K = φ''(w') *)
Theorem n1_pointwise (J K : R) : J != 0 ->
  (forall g H : R, g != 0 -> (J ^+ 2 * H + K * g) / (J * g) ^+ 2 = H / g ^+ 2) <-> K = 0.
Proof.
move=> J0; split => [E|-> g H g0].
  have := E 1 0 (oner_neq0 _); rewrite mulr0 add0r !mulr1 mul0r.
  by move/eqP; rewrite mulf_eq0 invr_eq0 (negbTE (expf_neq0 2 J0)) orbF => /eqP.
by rewrite mul0r addr0 exprMn invfM mulrACA mulfV ?expf_neq0 // mul1r.
Qed.

(* globally: φ'' = 0 everywhere iff φ is affine *)
Theorem n1_affine_iff (phi dphi d2phi : R^o -> R^o) :
  (forall x : R^o, is_derive x 1 phi (dphi x)) ->
  (forall x : R^o, is_derive x 1 dphi (d2phi x)) ->
  (forall x, d2phi x = 0) <-> exists s a : R, forall x, phi x = s * x + a.
Proof.
move=> D1 D2; split => [Z|[s [a A]] x].
  have C : forall x, dphi x = dphi 0.
    move=> x; apply: is_derive_0_is_cst => y.
    by apply: is_derive_eq (D2 y) _; rewrite Z.
  exists (dphi 0), (phi 0) => x.
  have P (y : R^o) : is_derive y 1 (phi - dphi 0 \*: id) 0.
    have H := is_deriveB (D1 y) (is_deriveZ (dphi 0) (is_derive_id y 1)).
    by apply: is_derive_eq H _; rewrite C [_%:A]mulr1 subrr.
  have := is_derive_0_is_cst x 0 P.
  move=> E; have E2 : phi x - dphi 0 * x = phi 0 - dphi 0 * 0 := E.
  by move: E2; rewrite mulr0 subr0 => <-; rewrite addrC subrK.
have phiE : phi = ((s \*: (id : R^o -> R^o)) + (cst a : R^o -> R^o) : R^o -> R^o).
  by apply/funext => y; rewrite A.
have Ds (y : R^o) : dphi y = s.
  have Dy : is_derive y 1 phi (s *: 1 + 0).
    by rewrite phiE; apply: is_deriveD.
  rewrite -(@derive_val _ _ _ _ _ _ _ (D1 y)) (@derive_val _ _ _ _ _ _ _ Dy).
  by rewrite addr0 [_%:A]mulr1.
have dE : dphi = cst s by apply/funext => y; rewrite Ds.
have Dx := D2 x; rewrite dE in Dx.
have Dc : is_derive x 1 (cst s : R^o -> R^o) 0 by apply: is_derive_cst.
by rewrite -(@derive_val _ _ _ _ _ _ _ Dx) (@derive_val _ _ _ _ _ _ _ Dc).
Qed.

End N1.

(* non-vacuity: φ = id (φ' = 1, φ'' = 0) satisfies the hypotheses of n1_affine_iff, and
   J = 1 those of n1_pointwise *)
Lemma n1_instance (R : realType) :
  [/\ forall x : R^o, is_derive x 1 (id : R^o -> R^o) (cst 1 x),
      forall x : R^o, is_derive x 1 (cst 1 : R^o -> R^o) (cst 0 x) & (1 : R) != 0].
Proof.
split => [x|x|]; last exact: oner_neq0.
- exact: is_derive_id.
- exact: is_derive_cst.
Qed.

(* instance of n1_pointwise: the affine reparameterization φ(w') = 2w' + a (J = 2, K = φ'' = 0)
   keeps D = H/g² for every g <> 0 and H *)
Lemma n1_pointwise_instance (R : realType) (g H : R) : g != 0 ->
  ((2 : R) ^+ 2 * H + 0 * g) / (2 * g) ^+ 2 = H / g ^+ 2.
Proof.
have t0 : (2 : R) != 0 by rewrite pnatr_eq0.
by move: g H; apply/(@n1_pointwise R 2 0 t0).
Qed.
